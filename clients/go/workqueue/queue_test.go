package workqueue_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

func TestQueueOperations(t *testing.T) {
	sc := startSidecar(t)
	client := dial(t, sc)
	ctx := context.Background()
	q := client.Queue("default")
	urgent := client.Queue("default", workqueue.WithPriority(10), workqueue.WithReason("backfill"))

	if err := q.Add(ctx, "ns/low"); err != nil {
		t.Fatal(err)
	}
	if err := urgent.Add(ctx, "ns/high"); err != nil {
		t.Fatal(err)
	}
	if err := q.AddAfter(ctx, time.Hour, "ns/later"); err != nil {
		t.Fatal(err)
	}
	backoffs, err := q.AddRateLimited(ctx, "ns/failed")
	if err != nil {
		t.Fatal(err)
	}
	if len(backoffs) != 1 || backoffs[0].Key != "ns/failed" || backoffs[0].Failures != 1 || backoffs[0].Delay <= 0 {
		t.Errorf("AddRateLimited = %+v; want one key with 1 failure and a delay", backoffs)
	}
	if n, err := q.NumRequeues(ctx, "ns/failed"); err != nil || n != 1 {
		t.Errorf("NumRequeues = %d, %v; want 1", n, err)
	}

	counts, err := q.Len(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// ns/failed's 5 ms backoff may or may not have passed.
	if counts.Ready+counts.Waiting != 4 || counts.Held != 0 || counts.Ready < 2 {
		t.Errorf("Len = %+v; want 4 keys, at least 2 ready", counts)
	}
	if len(counts.ReadyByPriority) == 0 || counts.ReadyByPriority[0] != (workqueue.PriorityCount{Priority: 10, Count: 1}) {
		t.Errorf("ReadyByPriority = %+v; want priority 10 first with 1 key", counts.ReadyByPriority)
	}

	high := keyState(t, q, "ns/high")
	if high.State != workqueue.KeyQueued || high.Priority != 10 || high.QueuedSince.IsZero() {
		t.Errorf("KeyState(ns/high) = %+v; want queued at priority 10", high)
	}
	if len(high.Reasons) != 1 || high.Reasons[0].Kind != workqueue.ReasonManual || high.Reasons[0].Source != "backfill" {
		t.Errorf("reasons of ns/high = %+v; want manual from backfill", high.Reasons)
	}
	if later := keyState(t, q, "ns/later"); later.State != workqueue.KeyWaiting || time.Until(later.WaitingUntil) < 59*time.Minute {
		t.Errorf("KeyState(ns/later) = %+v; want waiting about an hour", later)
	}
	if st := keyState(t, q, "never-added"); st.State != workqueue.KeyAbsent {
		t.Errorf("KeyState(never-added) = %s; want absent", st.State)
	}

	if err := q.Forget(ctx, "ns/failed"); err != nil {
		t.Fatal(err)
	}
	if n, err := q.NumRequeues(ctx, "ns/failed"); err != nil || n != 0 {
		t.Errorf("NumRequeues after Forget = %d, %v; want 0", n, err)
	}

	// Highest priority first.
	lease, err := q.Get(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if lease.Key != "ns/high" || lease.Priority != 10 || time.Until(lease.Deadline) <= 0 {
		t.Errorf("Get = %+v; want ns/high at priority 10 with a deadline ahead", lease)
	}
	if st := keyState(t, q, "ns/high"); st.State != workqueue.KeyHeld || st.Holder == "" {
		t.Errorf("KeyState of a leased key = %+v; want held with a holder", st)
	}
	if err := lease.Finish(ctx, workqueue.Result{}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestGetWithNothingReadyIsErrNoKey(t *testing.T) {
	sc := startSidecar(t)
	q := dial(t, sc).Queue("default")
	began := time.Now()
	_, err := q.Get(context.Background(), 200*time.Millisecond)
	if !errors.Is(err, workqueue.ErrNoKey) {
		t.Fatalf("Get on an empty queue: %v; want ErrNoKey", err)
	}
	if waited := time.Since(began); waited < 150*time.Millisecond {
		t.Errorf("Get returned after %s; want it to wait about 200ms", waited)
	}
}

func TestStaleTokensAreErrStaleLease(t *testing.T) {
	sc := startSidecar(t)
	q := dial(t, sc).Queue("default")
	ctx := context.Background()
	if err := q.Add(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	lease, err := q.Get(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if cancel, err := lease.Extend(ctx, time.Minute); err != nil || cancel {
		t.Fatalf("Extend of a live lease = %v, %v", cancel, err)
	}
	if time.Until(lease.Deadline) < 50*time.Second {
		t.Errorf("deadline after a 1m Extend is %s away", time.Until(lease.Deadline))
	}
	if err := lease.Finish(ctx, workqueue.Result{}, errors.New("first try failed")); err != nil {
		t.Fatal(err)
	}

	// The lease has ended: every call with its token is refused, and changes nothing.
	checks := map[string]error{
		"Done":   lease.Done(ctx),
		"Finish": lease.Finish(ctx, workqueue.Result{}, nil),
	}
	_, checks["Extend"] = lease.Extend(ctx, 0)
	for call, err := range checks {
		if !errors.Is(err, workqueue.ErrStaleLease) {
			t.Errorf("%s with a stale token: %v; want ErrStaleLease", call, err)
		}
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("%s: status code %s; want FailedPrecondition", call, status.Code(err))
		}
	}
	st := keyState(t, q, "k")
	if st.Failures != 1 || st.LastError != "first try failed" {
		t.Errorf("after stale calls: %+v; want the retry's 1 failure and error kept", st)
	}
}

// conformance: C10
func TestUnknownQueueIsErrUnknownQueue(t *testing.T) {
	sc := startSidecar(t)
	q := dial(t, sc).Queue("no-such-queue")
	ctx := context.Background()
	if err := q.Add(ctx, "k"); !errors.Is(err, workqueue.ErrUnknownQueue) {
		t.Errorf("Add: %v; want ErrUnknownQueue", err)
	}
	if _, err := q.Len(ctx); !errors.Is(err, workqueue.ErrUnknownQueue) {
		t.Errorf("Len: %v; want ErrUnknownQueue", err)
	}
	// Run gives up at once: reopening cannot fix a wrong queue name.
	runCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := q.Run(runCtx, 1, workqueue.ReconcilerFunc(func(context.Context, workqueue.Request) (workqueue.Result, error) {
		return workqueue.Result{}, nil
	}))
	if !errors.Is(err, workqueue.ErrUnknownQueue) {
		t.Errorf("Run: %v; want ErrUnknownQueue", err)
	}
	if runCtx.Err() != nil {
		t.Error("Run retried an unknown queue until its context ended")
	}
}

func TestInvalidArgumentsAreErrInvalidArgument(t *testing.T) {
	sc := startSidecar(t)
	q := dial(t, sc).Queue("default")
	if err := q.Add(context.Background(), ""); !errors.Is(err, workqueue.ErrInvalidArgument) {
		t.Errorf("Add of an empty key: %v; want ErrInvalidArgument", err)
	}
	if err := q.AddAfter(context.Background(), -time.Second, "k"); !errors.Is(err, workqueue.ErrInvalidArgument) {
		t.Errorf("AddAfter with a negative delay: %v; want ErrInvalidArgument", err)
	}
}

func TestShutDownWithDrainReportsFinishedLeases(t *testing.T) {
	sc := startSidecar(t)
	q := dial(t, sc).Queue("default")
	ctx := context.Background()
	if err := q.Add(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	a, err := q.Get(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Get(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = a.Done(ctx)
	}()
	report, err := q.ShutDownWithDrain(ctx, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if report != (workqueue.DrainReport{Finished: 1, Returned: 1}) {
		t.Errorf("drain report %+v; want 1 finished, 1 returned", report)
	}
}

func TestDialUnixSocketPath(t *testing.T) {
	socket := t.TempDir() + "/wq.sock"
	startSidecar(t, "--unix", socket, "--tcp", "off")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A bare absolute path means a unix socket.
	client, err := workqueue.Dial(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Queue("default").Len(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestDialGivesUpWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := workqueue.Dial(ctx, "unix://"+t.TempDir()+"/nobody-listens.sock")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dial to nothing: %v; want context.DeadlineExceeded", err)
	}
}

// A sidecar that is not up yet is waited for (in a pod its container may
// start after the worker's), but not silently: Dial logs that it waits, and
// why, not once per attempt; when its context ends, the error names the
// address and the last connection error.
func TestDialWaitingForASidecarSaysWhy(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := closed.Addr().String()
	_ = closed.Close() // nothing listens there now
	socket := t.TempDir() + "/nobody-listens.sock"
	for _, tc := range []struct{ target, cause string }{
		{port, "connection refused"},
		{"unix://" + socket, "no such file or directory"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			logger, logs := captureLogs(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := workqueue.Dial(ctx, tc.target, workqueue.WithLogger(logger))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Dial to nothing: %v; want context.DeadlineExceeded", err)
			}
			t.Logf("Dial: %v", err)
			if !strings.Contains(err.Error(), tc.target) || !strings.Contains(err.Error(), tc.cause) {
				t.Errorf("Dial to nothing: %q; want it to name %q and %q", err, tc.target, tc.cause)
			}
			waiting := logs.matching(func(r logRecord) bool { return strings.Contains(r.msg, "waiting for the sidecar") })
			if len(waiting) != 1 {
				t.Fatalf("%d lines say Dial is waiting for the sidecar; want 1 (the first failure; the next after %s)", len(waiting), 10*time.Second)
			}
			if line := waiting[0]; line.level != slog.LevelInfo || line.attrs["target"] != tc.target || !strings.Contains(line.attrs["err"], tc.cause) {
				t.Errorf("Dial logged %s; want INFO with target=%q and the cause %q", line, tc.target, tc.cause)
			}
		})
	}
}
