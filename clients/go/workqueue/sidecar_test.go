package workqueue_test

// Helpers of the tests: each test starts the real sidecar binary
// (internal/sidecartest) and dials it.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/internal/sidecartest"
	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

// TestMain builds (or finds) the sidecar once, before any test starts one.
func TestMain(m *testing.M) {
	// Re-executed as a worker process by the stalled-worker test.
	if target := os.Getenv(stallTargetEnv); target != "" {
		runStallWorker(target, os.Getenv(stallLogEnv))
	}
	if _, err := sidecartest.Binary(); err != nil {
		fmt.Fprintln(os.Stderr, "workqueue tests:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

type sidecar = sidecartest.Sidecar

func startSidecar(t *testing.T, args ...string) *sidecar {
	t.Helper()
	// The suite tests ShutDown, which a sidecar refuses unless allowed.
	return sidecartest.Start(t, append(args, "--allow-shutdown-rpc")...)
}

// startShortLeaseSidecar starts a sidecar whose queue "default" grants 1 s
// leases by default, for tests of leases that run out.
func startShortLeaseSidecar(t *testing.T) *sidecar {
	t.Helper()
	return startSidecar(t, "--config", writeConfig(t, "queues:\n  default:\n    lease_ttl: 1s\n"))
}

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	return sidecartest.WriteConfig(t, yaml)
}

// dial connects a client to s, logging into the test's output.
func dial(t *testing.T, s *sidecar) *workqueue.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := workqueue.Dial(ctx, s.Target, workqueue.WithLogger(testLogger(t)), workqueue.WithWorkerName(t.Name()))
	if err != nil {
		t.Fatalf("dial %s: %v", s.Target, err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// testLogger writes slog records into the test's log until the test ends
// (a reconcile goroutine may still log after that).
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// eventually polls cond every 20 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runWorker runs q.Run in the background; the returned stop cancels it and
// returns Run's error (failing the test if Run does not return in time).
func runWorker(t *testing.T, q *workqueue.Queue, concurrency int, r workqueue.Reconciler, opts ...workqueue.WorkOption) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx, concurrency, r, opts...) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Errorf("Run did not return within 30s of its context's cancellation")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}
