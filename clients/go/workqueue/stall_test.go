package workqueue_test

// A worker stopped (SIGSTOP) for longer than its leases must never commit a
// reconcile while another worker holds the same key: the test runs two
// worker processes (this test binary, re-executed), freezes one, and checks
// the successful reconciles each recorded for overlaps.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

// The child process's settings, from its environment.
const (
	stallTargetEnv = "WQS_STALL_WORKER_TARGET"
	stallLogEnv    = "WQS_STALL_WORKER_LOG"
)

const (
	stallLeaseTTL = time.Second
	stallHold     = 400 * time.Millisecond
	// stallCycles is how often the first worker is stopped and resumed.
	stallCycles = 3
	stallKeys   = 2
)

// runStallWorker is the child: it reconciles the queue "default" until
// killed, appending one line per reconcile to the log file:
// "success KEY PID START_NS END_NS" when it committed, "abandon KEY PID" when
// its lease ended first. It commits only while ctx.Deadline() (the lease's
// deadline) has not passed, as the README asks of a reconcile.
func runStallWorker(target, logPath string) {
	ctx := context.Background()
	client, err := workqueue.Dial(ctx, target, workqueue.WithWorkerName(fmt.Sprintf("stall-%d", os.Getpid())))
	if err != nil {
		fmt.Fprintln(os.Stderr, "stall worker:", err)
		os.Exit(1)
	}
	logFile, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stall worker:", err)
		os.Exit(1)
	}
	record := func(format string, args ...any) {
		_, _ = logFile.WriteString(fmt.Sprintf(format, args...) + "\n") // one write per line: O_APPEND keeps lines whole
	}
	pid := os.Getpid()
	reconcile := workqueue.ReconcilerFunc(func(ctx context.Context, req workqueue.Request) (workqueue.Result, error) {
		start := time.Now()
		select {
		case <-ctx.Done():
		case <-time.After(stallHold):
		}
		deadline, hasDeadline := ctx.Deadline()
		if ctx.Err() != nil || (hasDeadline && !time.Now().Before(deadline)) {
			record("abandon %s %d", req.Key, pid)
			return workqueue.Result{}, errors.New("lease ended before the commit")
		}
		record("success %s %d %d %d", req.Key, pid, start.UnixNano(), time.Now().UnixNano())
		return workqueue.Result{RequeueAfter: 10 * time.Millisecond}, nil
	})
	err = client.Queue("default").Run(ctx, 4, reconcile, workqueue.WithLeaseTTL(stallLeaseTTL))
	fmt.Fprintln(os.Stderr, "stall worker: run ended:", err)
	os.Exit(1)
}

func startStallWorker(t *testing.T, target, logPath string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), stallTargetEnv+"="+target, stallLogEnv+"="+logPath)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a worker process: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

type commit struct {
	pid        int
	start, end int64
}

// conformance: C6
func TestAStoppedWorkerNeverCommitsWhileAnotherHoldsTheKey(t *testing.T) {
	s := startSidecar(t)
	client := dial(t, s)
	q := client.Queue("default")
	ctx := context.Background()
	keys := make([]string, stallKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("ns/k%d", i)
	}
	if err := q.Add(ctx, keys...); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "reconciles.log")
	first := startStallWorker(t, s.Target, logPath)
	time.Sleep(time.Second) // the first worker holds leases
	startStallWorker(t, s.Target, logPath)
	time.Sleep(time.Second)
	for range stallCycles {
		if err := first.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * stallLeaseTTL) // its leases expire; the second worker takes their keys
		if err := first.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
	}

	commits := map[string][]commit{}
	abandoned, byFirst := 0, 0
	file, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	lines := bufio.NewScanner(file)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) == 3 && fields[0] == "abandon" {
			abandoned++
			continue
		}
		if len(fields) != 5 || fields[0] != "success" {
			t.Fatalf("unexpected log line %q", lines.Text())
		}
		pid, _ := strconv.Atoi(fields[2])
		start, _ := strconv.ParseInt(fields[3], 10, 64)
		end, _ := strconv.ParseInt(fields[4], 10, 64)
		commits[fields[1]] = append(commits[fields[1]], commit{pid, start, end})
		if pid == first.Process.Pid {
			byFirst++
		}
	}
	total := 0
	for key, cs := range commits {
		total += len(cs)
		sort.Slice(cs, func(i, j int) bool { return cs[i].start < cs[j].start })
		for i := 1; i < len(cs); i++ {
			if cs[i].start < cs[i-1].end {
				t.Errorf("%s: two successful reconciles overlap: pid %d [%d, %d] and pid %d [%d, %d]",
					key, cs[i-1].pid, cs[i-1].start, cs[i-1].end, cs[i].pid, cs[i].start, cs[i].end)
			}
		}
	}
	t.Logf("%d successful reconciles (%d by the stopped worker), %d abandoned", total, byFirst, abandoned)
	if total == 0 || byFirst == 0 {
		t.Fatalf("the scenario did not run: %d commits, %d by the stopped worker", total, byFirst)
	}
}
