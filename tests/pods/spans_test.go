package pods

// Reconcile spans, read from the reconcilers' logs: the Go example logs
// `msg=reconciled key=K start_ns=S end_ns=E` for each reconcile. Following
// every controller pod's log from its start, across failovers and rollouts,
// tells whether any key was reconciled twice at once.

import (
	"bufio"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type span struct {
	pod        string
	key        string
	start, end int64
}

type spans struct {
	mu        sync.Mutex
	all       []span
	following map[string]bool // pod UID + restart count
	cancel    context.CancelFunc
	done      sync.WaitGroup
}

// followSpans follows the reconciler's log of every controller pod, present
// and future, until the test ends.
func followSpans(t *testing.T) *spans {
	ctx, cancel := context.WithCancel(context.Background())
	s := &spans{following: map[string]bool{}, cancel: cancel}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		for ctx.Err() == nil {
			list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err == nil {
				for _, pod := range list.Items {
					s.follow(ctx, t, pod)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		s.done.Wait()
	})
	return s
}

func (s *spans) follow(ctx context.Context, t *testing.T, pod corev1.Pod) {
	for _, status := range pod.Status.ContainerStatuses {
		if status.Name != "reconciler" || status.State.Running == nil {
			continue
		}
		id := fmt.Sprintf("%s/%d", pod.UID, status.RestartCount)
		s.mu.Lock()
		seen := s.following[id]
		s.following[id] = true
		s.mu.Unlock()
		if seen {
			continue
		}
		s.done.Add(1)
		go func() {
			defer s.done.Done()
			stream, err := kube.CoreV1().Pods(namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "reconciler", Follow: true}).Stream(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.Logf("following %s: %v", pod.Name, err)
				}
				return
			}
			defer stream.Close()
			lines := bufio.NewScanner(stream)
			for lines.Scan() {
				if got, ok := parseSpan(pod.Name, lines.Text()); ok {
					s.mu.Lock()
					s.all = append(s.all, got)
					s.mu.Unlock()
				}
			}
		}()
	}
}

// parseSpan reads `... msg=reconciled key=K start_ns=S end_ns=E ...` (slog's text format).
func parseSpan(pod, line string) (span, bool) {
	if !strings.Contains(line, "msg=reconciled ") {
		return span{}, false
	}
	got := span{pod: pod}
	for _, field := range strings.Fields(line) {
		name, value, _ := strings.Cut(field, "=")
		switch name {
		case "key":
			got.key = value
		case "start_ns":
			got.start, _ = strconv.ParseInt(value, 10, 64)
		case "end_ns":
			got.end, _ = strconv.ParseInt(value, 10, 64)
		}
	}
	return got, got.key != "" && got.start > 0 && got.end >= got.start
}

// count is how many reconciles were seen, and in how many pods.
func (s *spans) count() (reconciles, pods int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, sp := range s.all {
		seen[sp.pod] = true
	}
	return len(s.all), len(seen)
}

// overlaps lists the reconciles of one key that ran at the same time.
func (s *spans) overlaps() []string {
	s.mu.Lock()
	byKey := map[string][]span{}
	for _, sp := range s.all {
		byKey[sp.key] = append(byKey[sp.key], sp)
	}
	s.mu.Unlock()
	var found []string
	for key, list := range byKey {
		sort.Slice(list, func(i, j int) bool { return list[i].start < list[j].start })
		for i := 1; i < len(list); i++ {
			if list[i].start < list[i-1].end {
				found = append(found, fmt.Sprintf("%s: %s [%d, %d] and %s [%d, %d]",
					key, list[i-1].pod, list[i-1].start, list[i-1].end, list[i].pod, list[i].start, list[i].end))
			}
		}
	}
	return found
}

// checkNoOverlap fails the test if any key was reconciled twice at once, and
// logs what was seen.
func (s *spans) checkNoOverlap(t *testing.T) {
	t.Helper()
	reconciles, pods := s.count()
	t.Logf("%d reconciles seen in the logs of %d pods", reconciles, pods)
	if reconciles == 0 {
		t.Fatal("no reconcile seen in the logs: the check would prove nothing")
	}
	if found := s.overlaps(); len(found) > 0 {
		t.Fatalf("keys reconciled twice at once:\n%s", strings.Join(found, "\n"))
	}
}
