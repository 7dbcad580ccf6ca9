package workqueue_test

import (
	"context"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

// A lost lease is one log line, a warning naming the queue, the key and why
// it was lost, however many ways the worker hears of the loss (its deadline
// passing, the sidecar's Cancel, the stream breaking, the reconcile
// returning after it).
func TestALostLeaseLogsOneWarning(t *testing.T) {
	for _, tc := range []struct {
		why string
		// lose makes the worker lose the lease of the key it reconciles.
		lose func(t *testing.T, sc *sidecar, q *workqueue.Queue)
	}{
		{"expired", func(t *testing.T, sc *sidecar, _ *workqueue.Queue) {
			// The sidecar answers no Extend: the lease's deadline passes.
			sc.Signal(syscall.SIGSTOP)
			t.Cleanup(func() { sc.Signal(syscall.SIGCONT) })
		}},
		{"revoked", func(t *testing.T, _ *sidecar, q *workqueue.Queue) {
			// The drain ends with the lease still held: the sidecar revokes it.
			if _, err := q.ShutDownWithDrain(context.Background(), 200*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}},
		{"stream broken", func(t *testing.T, sc *sidecar, _ *workqueue.Queue) {
			sc.Signal(syscall.SIGKILL)
		}},
	} {
		t.Run(tc.why, func(t *testing.T) {
			sc := startSidecar(t)
			client, logs := dialCapturing(t, sc)
			q := client.Queue("default")
			rec := newRecorder(func(ctx context.Context, _ workqueue.Request, _ int) (workqueue.Result, error) {
				<-ctx.Done()
				return workqueue.Result{}, context.Cause(ctx)
			})
			stop := runWorker(t, q, 1, rec, workqueue.WithLeaseTTL(time.Second))
			if err := q.Add(context.Background(), "k"); err != nil {
				t.Fatal(err)
			}
			rec.waitStarted(t, 5*time.Second)
			tc.lose(t, sc, q)
			eventually(t, 20*time.Second, "the reconcile to return", func() bool {
				return !rec.of("k")[0].end.IsZero()
			})
			_ = stop() // Run has returned: whatever it logs of the lease is logged

			lines := logs.matching(func(r logRecord) bool { return r.attrs["key"] == "k" && r.level >= slog.LevelInfo })
			for _, line := range lines {
				t.Logf("logged: %s", line)
			}
			if len(lines) != 1 {
				t.Fatalf("%d lines at INFO or above name the key; want 1", len(lines))
			}
			if line := lines[0]; line.level != slog.LevelWarn || line.attrs["why"] != tc.why || line.attrs["queue"] != "default" {
				t.Errorf("the loss is logged as %s; want a WARN with why=%q and queue=default", line, tc.why)
			}
		})
	}
}

// The sidecar refuses the Finish a worker sends for a lease it gave up
// (every lease gets one): expected, so no warning, however late the refusal
// comes. Here the sidecar stalls (SIGSTOP) well past the lease's TTL, and
// answers the Finish only when it resumes.
func TestTheRefusedFinishOfAGivenUpLeaseIsNoWarning(t *testing.T) {
	const ttl = time.Second
	sc := startSidecar(t)
	client, logs := dialCapturing(t, sc)
	q := client.Queue("default")
	rec := newRecorder(func(ctx context.Context, _ workqueue.Request, n int) (workqueue.Result, error) {
		if n == 0 {
			<-ctx.Done() // the lease is lost while the sidecar is stopped
		}
		return workqueue.Result{}, context.Cause(ctx)
	})
	runWorker(t, q, 1, rec, workqueue.WithLeaseTTL(ttl))
	if err := q.Add(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	rec.waitStarted(t, 5*time.Second)
	sc.Signal(syscall.SIGSTOP)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			sc.Signal(syscall.SIGCONT)
		}
	})
	eventually(t, 20*time.Second, "the reconcile to return, its lease given up", func() bool {
		return !rec.of("k")[0].end.IsZero()
	})
	time.Sleep(3 * ttl) // the stall goes on: the Finish waits unread
	sc.Signal(syscall.SIGCONT)
	resumed = true

	refusals := func() []logRecord {
		return logs.matching(func(r logRecord) bool { return r.attrs["key"] == "k" && strings.Contains(r.msg, "refused") })
	}
	eventually(t, 20*time.Second, "the sidecar's refusal of the Finish to be logged", func() bool { return len(refusals()) > 0 })
	for _, r := range refusals() {
		if r.level >= slog.LevelWarn {
			t.Errorf("the expected refusal is logged as %s; want below WARN", r)
		}
	}
}
