package workqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

// attempt is one call of a test reconciler.
type attempt struct {
	req      workqueue.Request
	start    time.Time
	end      time.Time
	ctxCause error // context.Cause of the reconcile's ctx when it returned
}

// recorder is a Reconciler that records every call and delegates to fn.
type recorder struct {
	fn func(ctx context.Context, req workqueue.Request, n int) (workqueue.Result, error)

	mu       sync.Mutex
	attempts []attempt
	started  chan workqueue.Request
}

func newRecorder(fn func(ctx context.Context, req workqueue.Request, n int) (workqueue.Result, error)) *recorder {
	return &recorder{fn: fn, started: make(chan workqueue.Request, 1000)}
}

func (r *recorder) Reconcile(ctx context.Context, req workqueue.Request) (workqueue.Result, error) {
	r.mu.Lock()
	n := 0
	for _, a := range r.attempts {
		if a.req.Key == req.Key {
			n++
		}
	}
	r.attempts = append(r.attempts, attempt{req: req, start: time.Now()})
	i := len(r.attempts) - 1
	r.mu.Unlock()
	r.started <- req
	res, err := r.fn(ctx, req, n)
	r.mu.Lock()
	r.attempts[i].end = time.Now()
	r.attempts[i].ctxCause = context.Cause(ctx)
	r.mu.Unlock()
	return res, err
}

func (r *recorder) all() []attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]attempt(nil), r.attempts...)
}

func (r *recorder) of(key string) []attempt {
	var out []attempt
	for _, a := range r.all() {
		if a.req.Key == key {
			out = append(out, a)
		}
	}
	return out
}

func (r *recorder) waitStarted(t *testing.T, timeout time.Duration) workqueue.Request {
	t.Helper()
	select {
	case req := <-r.started:
		return req
	case <-time.After(timeout):
		t.Fatalf("no reconcile started within %s", timeout)
		return workqueue.Request{}
	}
}

func keyState(t *testing.T, q *workqueue.Queue, key string) workqueue.KeyStatus {
	t.Helper()
	st, err := q.KeyState(context.Background(), key)
	if err != nil {
		t.Fatalf("KeyState(%q): %v", key, err)
	}
	return st
}

// conformance: C1
func TestRunSuccessForgetsTheKeyAndItsFailures(t *testing.T) {
	sc := startSidecar(t)
	q := dial(t, sc).Queue("default")
	ctx := context.Background()
	// Two failures on record before the worker sees the key.
	for range 2 {
		if _, err := q.AddRateLimited(ctx, "ns/a"); err != nil {
			t.Fatal(err)
		}
	}
	rec := newRecorder(func(context.Context, workqueue.Request, int) (workqueue.Result, error) {
		return workqueue.Result{}, nil
	})
	runWorker(t, q, 1, rec)
	req := rec.waitStarted(t, 5*time.Second)
	if req.Key != "ns/a" || req.Failures != 2 || !req.Has(workqueue.ReasonRetry) {
		t.Errorf("request = %+v; want key ns/a, 2 failures, reason retry", req)
	}
	eventually(t, 5*time.Second, "the key to be finished", func() bool {
		return keyState(t, q, "ns/a").State == workqueue.KeyAbsent
	})
	if n, err := q.NumRequeues(ctx, "ns/a"); err != nil || n != 0 {
		t.Errorf("NumRequeues = %d, %v; want 0 after success", n, err)
	}
}

// conformance: C2
func TestRunErrorRetriesWithBackoffAndCountsFailures(t *testing.T) {
	config := writeConfig(t, `
queues:
  default:
    rate_limiter:
      exponential: { base: 100ms, max: 10s }
`)
	sc := startSidecar(t, "--config", config)
	q := dial(t, sc).Queue("default")
	const failing = 3
	rec := newRecorder(func(_ context.Context, _ workqueue.Request, n int) (workqueue.Result, error) {
		if n < failing {
			return workqueue.Result{}, fmt.Errorf("attempt %d failed", n)
		}
		return workqueue.Result{}, nil
	})
	runWorker(t, q, 1, rec)
	if err := q.Add(context.Background(), "ns/flaky"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the fourth attempt to finish", func() bool {
		a := rec.of("ns/flaky")
		return len(a) == failing+1 && !a[failing].end.IsZero()
	})
	attempts := rec.of("ns/flaky")
	for i, a := range attempts {
		if a.req.Failures != i {
			t.Errorf("attempt %d: Failures = %d, want %d", i, a.req.Failures, i)
		}
		if i == 0 {
			continue
		}
		if want := fmt.Sprintf("attempt %d failed", i-1); a.req.LastError != want {
			t.Errorf("attempt %d: LastError = %q, want %q", i, a.req.LastError, want)
		}
		if !a.req.Has(workqueue.ReasonRetry) {
			t.Errorf("attempt %d: reasons %v lack retry", i, a.req.Reasons)
		}
		// base * 2^(failures before this one): 100ms, 200ms, 400ms.
		backoff := 100 * time.Millisecond << (i - 1)
		gap := a.start.Sub(attempts[i-1].end)
		t.Logf("attempt %d after %s (backoff %s)", i, gap.Round(time.Millisecond), backoff)
		if gap < backoff*9/10 {
			t.Errorf("attempt %d came %s after the previous failure; backoff is %s", i, gap, backoff)
		}
	}
	eventually(t, 5*time.Second, "the failures to be forgotten", func() bool {
		n, err := q.NumRequeues(context.Background(), "ns/flaky")
		return err == nil && n == 0
	})
}

// conformance: C3
func TestRunRequeueAfterBringsTheKeyBackLater(t *testing.T) {
	sc := startSidecar(t)
	q := dial(t, sc).Queue("default")
	const delay = 400 * time.Millisecond
	rec := newRecorder(func(_ context.Context, _ workqueue.Request, n int) (workqueue.Result, error) {
		if n == 0 {
			return workqueue.Result{RequeueAfter: delay}, nil
		}
		return workqueue.Result{}, nil
	})
	runWorker(t, q, 1, rec)
	if err := q.Add(context.Background(), "poll"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the key to wait", func() bool {
		return keyState(t, q, "poll").State == workqueue.KeyWaiting
	})
	eventually(t, 5*time.Second, "the second attempt to finish", func() bool {
		a := rec.of("poll")
		return len(a) == 2 && !a[1].end.IsZero()
	})
	a := rec.of("poll")
	gap := a[1].start.Sub(a[0].end)
	t.Logf("requeued after %s", gap.Round(time.Millisecond))
	if gap < delay*9/10 {
		t.Errorf("second attempt %s after the first; asked for %s", gap, delay)
	}
	if a[1].req.Failures != 0 || !a[1].req.Has(workqueue.ReasonRequeueAfter) {
		t.Errorf("second attempt = %+v; want 0 failures and reason requeue_after", a[1].req)
	}
}

// conformance: C4
func TestRunExtendsTheLeaseOfASlowReconcile(t *testing.T) {
	q := dial(t, startShortLeaseSidecar(t)).Queue("default")
	const work = 3500 * time.Millisecond // three and a half lease TTLs
	rec := newRecorder(func(ctx context.Context, _ workqueue.Request, _ int) (workqueue.Result, error) {
		select {
		case <-time.After(work):
			return workqueue.Result{}, nil
		case <-ctx.Done():
			return workqueue.Result{}, context.Cause(ctx)
		}
	})
	// A window of 2: an expired lease's key would come straight back to
	// this worker as a second attempt.
	runWorker(t, q, 2, rec)
	if err := q.Add(context.Background(), "slow"); err != nil {
		t.Fatal(err)
	}
	rec.waitStarted(t, 5*time.Second)
	time.Sleep(2500 * time.Millisecond)
	st := keyState(t, q, "slow")
	if st.State != workqueue.KeyHeld || time.Until(st.HeldUntil) <= 0 {
		t.Errorf("2.5s into a 1s lease: state %s, held until %s; want held, deadline ahead", st.State, st.HeldUntil)
	}
	eventually(t, 5*time.Second, "the slow reconcile to finish", func() bool {
		return keyState(t, q, "slow").State == workqueue.KeyAbsent
	})
	attempts := rec.of("slow")
	if len(attempts) != 1 {
		t.Fatalf("%d attempts; want 1 (the lease must not expire)", len(attempts))
	}
	if attempts[0].ctxCause != nil {
		t.Errorf("the reconcile's context was cancelled: %v", attempts[0].ctxCause)
	}
	if n, _ := q.NumRequeues(context.Background(), "slow"); n != 0 {
		t.Errorf("NumRequeues = %d; want 0", n)
	}
}

// conformance: C5
func TestRunCancelsReconcilesWhenTheSidecarShutsDown(t *testing.T) {
	sc := startSidecar(t, "--grace-period", "1s")
	q := dial(t, sc).Queue("default")
	rec := newRecorder(func(ctx context.Context, _ workqueue.Request, _ int) (workqueue.Result, error) {
		<-ctx.Done()
		return workqueue.Result{}, context.Cause(ctx)
	})
	runWorker(t, q, 1, rec)
	if err := q.Add(context.Background(), "stuck"); err != nil {
		t.Fatal(err)
	}
	rec.waitStarted(t, 5*time.Second)
	sent := time.Now()
	sc.Signal(syscall.SIGTERM)
	eventually(t, 10*time.Second, "the reconcile to be cancelled", func() bool {
		a := rec.of("stuck")
		return len(a) == 1 && !a[0].end.IsZero()
	})
	a := rec.of("stuck")[0]
	t.Logf("reconcile cancelled %s after SIGTERM (grace period 1s), cause: %v", a.end.Sub(sent).Round(time.Millisecond), a.ctxCause)
	if !errors.Is(a.ctxCause, workqueue.ErrLeaseLost) {
		t.Errorf("cause = %v; want ErrLeaseLost", a.ctxCause)
	}
	if err := sc.Wait(10 * time.Second); err != nil {
		t.Errorf("sidecar exit: %v; want status 0", err)
	}
}

func TestRunCancelsWhenTheQueueShutsDownAndStillFinishes(t *testing.T) {
	sc := startSidecar(t)
	q := dial(t, sc).Queue("default")
	rec := newRecorder(func(ctx context.Context, _ workqueue.Request, _ int) (workqueue.Result, error) {
		<-ctx.Done()
		return workqueue.Result{}, nil // wrapped up cleanly: success
	})
	runWorker(t, q, 1, rec)
	ctx := context.Background()
	if _, err := q.AddRateLimited(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	rec.waitStarted(t, 5*time.Second)
	if err := q.ShutDown(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the reconcile to be cancelled", func() bool {
		a := rec.of("k")
		return len(a) == 1 && !a[0].end.IsZero()
	})
	if cause := rec.of("k")[0].ctxCause; !errors.Is(cause, workqueue.ErrCancelled) {
		t.Errorf("cause = %v; want ErrCancelled", cause)
	}
	// The lease stayed valid: the success was applied.
	eventually(t, 5*time.Second, "the finish to be applied", func() bool {
		st := keyState(t, q, "k")
		return st.State == workqueue.KeyAbsent && st.Failures == 0
	})
	if err := q.Add(ctx, "late"); !errors.Is(err, workqueue.ErrUnavailable) {
		t.Errorf("Add after ShutDown: %v; want ErrUnavailable", err)
	}
}

// conformance: C7
func TestRunStopsGracefullyAndHandsKeysBack(t *testing.T) {
	sc := startSidecar(t)
	q := dial(t, sc).Queue("default")
	release := make(chan struct{})
	rec := newRecorder(func(ctx context.Context, _ workqueue.Request, _ int) (workqueue.Result, error) {
		<-release
		return workqueue.Result{}, nil
	})
	keys := []string{"a", "b", "c", "d", "e", "f"}
	if err := q.Add(context.Background(), keys...); err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, q, 2, rec)
	rec.waitStarted(t, 5*time.Second)
	rec.waitStarted(t, 5*time.Second)

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-stopped:
		t.Fatalf("Run returned (%v) while reconciles were running", err)
	default:
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Run: %v", err)
	}

	attempts := rec.all()
	if len(attempts) != 2 {
		t.Errorf("%d reconciles ran; want 2 (none may start once stopping)", len(attempts))
	}
	finished := map[string]bool{}
	for _, a := range attempts {
		finished[a.req.Key] = true
		if a.ctxCause != nil {
			t.Errorf("%s: context cancelled (%v) during a graceful stop within the timeout", a.req.Key, a.ctxCause)
		}
	}
	for _, key := range keys {
		st := keyState(t, q, key)
		switch {
		case finished[key] && st.State != workqueue.KeyAbsent:
			t.Errorf("%s was reconciled but is %s; want its finish applied", key, st.State)
		case !finished[key] && (st.State == workqueue.KeyAbsent || st.State == workqueue.KeyHeld):
			t.Errorf("%s was not reconciled but is %s; want it back in the queue", key, st.State)
		case !finished[key] && st.Failures != 0:
			t.Errorf("%s was never started but counts %d failures (%q); a clean stop is not its failure", key, st.Failures, st.LastError)
		}
	}
	counts, err := q.Len(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if counts.Held != 0 || counts.Ready+counts.Waiting != len(keys)-2 {
		t.Errorf("after the stop: %+v; want nothing held and %d keys queued", counts, len(keys)-2)
	}
}

func TestRunNeverReconcilesOneKeyTwiceAtOnceInAProcess(t *testing.T) {
	sc := startShortLeaseSidecar(t)
	q := dial(t, sc).Queue("default")
	rec := newRecorder(func(ctx context.Context, _ workqueue.Request, n int) (workqueue.Result, error) {
		if n == 0 {
			time.Sleep(4 * time.Second) // ignores its context, lease lost or not
		}
		return workqueue.Result{}, nil
	})
	if err := q.Add(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, q, 2, rec)
	rec.waitStarted(t, 5*time.Second)
	// The sidecar stalls past the lease: the worker loses it, the sidecar
	// expires it, and the key comes back to this worker's free slot while
	// the first reconcile still runs.
	sc.Signal(syscall.SIGSTOP)
	time.Sleep(2 * time.Second)
	sc.Signal(syscall.SIGCONT)
	eventually(t, 20*time.Second, "the key reconciled again", func() bool { return len(rec.of("a")) == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	a := rec.of("a")
	if a[1].start.Before(a[0].end) {
		t.Errorf("a's second reconcile started at %s, before its first returned at %s", a[1].start.Format(time.StampMicro), a[0].end.Format(time.StampMicro))
	}
}

func TestRunRefusesABackoffThatCannotGrow(t *testing.T) {
	sc := startSidecar(t)
	q := dial(t, sc).Queue("default")
	for _, b := range [][2]time.Duration{{0, 0}, {0, time.Second}, {time.Second, time.Millisecond}} {
		err := q.Run(context.Background(), 1, newRecorder(nil), workqueue.WithReconnectBackoff(b[0], b[1]))
		if err == nil || !strings.Contains(err.Error(), "WithReconnectBackoff") {
			t.Errorf("WithReconnectBackoff(%s, %s): Run returned %v; want it refused", b[0], b[1], err)
		}
	}
}

func TestRunReturnsWhenItsClientIsClosed(t *testing.T) {
	sc := startSidecar(t)
	client := dial(t, sc)
	q := client.Queue("default")
	rec := newRecorder(func(ctx context.Context, _ workqueue.Request, _ int) (workqueue.Result, error) {
		<-ctx.Done()
		return workqueue.Result{}, nil
	})
	if err := q.Add(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- q.Run(context.Background(), 1, rec) }()
	rec.waitStarted(t, 5*time.Second)
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("Run returned nil after its client was closed; want an error saying so")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run still reopening its stream 30 s after its client was closed")
	}
}

func TestRunStopTimeoutCancelsAndHandsBack(t *testing.T) {
	sc := startSidecar(t)
	q := dial(t, sc).Queue("default")
	release := make(chan struct{})
	defer close(release)
	cancelled := make(chan error, 1)
	rec := newRecorder(func(ctx context.Context, _ workqueue.Request, _ int) (workqueue.Result, error) {
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		<-release // ignores its context for a while longer
		return workqueue.Result{}, nil
	})
	stop := runWorker(t, q, 1, rec, workqueue.WithStopTimeout(300*time.Millisecond))
	if err := q.Add(context.Background(), "stubborn"); err != nil {
		t.Fatal(err)
	}
	rec.waitStarted(t, 5*time.Second)
	began := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	took := time.Since(began)
	t.Logf("Run returned %s after cancel with a 300ms stop timeout", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("Run took %s to stop", took)
	}
	select {
	case cause := <-cancelled:
		if !errors.Is(cause, workqueue.ErrLeaseLost) {
			t.Errorf("cause = %v; want ErrLeaseLost", cause)
		}
	default:
		t.Error("the reconcile's context was not cancelled at the stop timeout")
	}
	st := keyState(t, q, "stubborn")
	if st.State == workqueue.KeyHeld || st.State == workqueue.KeyAbsent {
		t.Errorf("after the stop timeout the key is %s; want it back in the queue", st.State)
	}
	if !st.Has(workqueue.ReasonLeaseReleased) {
		t.Errorf("reasons %v; want lease_released", st.Reasons)
	}
}

// conformance: C9
func TestRunNeverExceedsConcurrency(t *testing.T) {
	sc := startSidecar(t)
	q := dial(t, sc).Queue("default")
	const concurrency, total = 3, 30
	var running, peak atomic.Int32
	rec := newRecorder(func(context.Context, workqueue.Request, int) (workqueue.Result, error) {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(30 * time.Millisecond)
		running.Add(-1)
		return workqueue.Result{}, nil
	})
	keys := make([]string, total)
	for i := range keys {
		keys[i] = fmt.Sprintf("ns/k%02d", i)
	}
	if err := q.Add(context.Background(), keys...); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	runWorker(t, q, concurrency, rec)
	eventually(t, 10*time.Second, "every key to be reconciled", func() bool {
		c, err := q.Len(context.Background())
		return err == nil && len(rec.all()) == total && c.Held == 0 && c.Ready == 0
	})
	t.Logf("%d keys × 30ms at concurrency %d in %s; peak %d", total, concurrency, time.Since(began).Round(time.Millisecond), peak.Load())
	if p := peak.Load(); p != concurrency {
		t.Errorf("peak concurrency %d; want exactly %d", p, concurrency)
	}
}

func TestRunRecoversAPanicAsARetry(t *testing.T) {
	sc := startSidecar(t)
	q := dial(t, sc).Queue("default")
	rec := newRecorder(func(_ context.Context, _ workqueue.Request, n int) (workqueue.Result, error) {
		if n == 0 {
			panic("boom")
		}
		return workqueue.Result{}, nil
	})
	runWorker(t, q, 1, rec)
	if err := q.Add(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the retry", func() bool { return len(rec.of("p")) == 2 })
	if got := rec.of("p")[1].req; got.LastError != "panic: boom" || got.Failures != 1 {
		t.Errorf("retry sees failures %d, last error %q; want 1, \"panic: boom\"", got.Failures, got.LastError)
	}
}

// conformance: C8
func TestRunReconnectsAfterTheSidecarRestarts(t *testing.T) {
	socket := t.TempDir() + "/wq.sock"
	first := startSidecar(t, "--unix", socket, "--tcp", "off")
	client := dial(t, first)
	q := client.Queue("default")
	rec := newRecorder(func(ctx context.Context, req workqueue.Request, _ int) (workqueue.Result, error) {
		if req.Key == "in-flight" {
			<-ctx.Done()
			return workqueue.Result{}, context.Cause(ctx)
		}
		return workqueue.Result{}, nil
	})
	runWorker(t, q, 1, rec, workqueue.WithReconnectBackoff(50*time.Millisecond, 500*time.Millisecond))
	if err := q.Add(context.Background(), "in-flight"); err != nil {
		t.Fatal(err)
	}
	rec.waitStarted(t, 5*time.Second)

	first.Signal(syscall.SIGKILL)
	eventually(t, 5*time.Second, "the in-flight reconcile to be cancelled", func() bool {
		a := rec.of("in-flight")
		return len(a) == 1 && !a[0].end.IsZero()
	})
	if cause := rec.of("in-flight")[0].ctxCause; !errors.Is(cause, workqueue.ErrLeaseLost) {
		t.Errorf("in-flight cause = %v; want ErrLeaseLost", cause)
	}

	restarted := time.Now()
	startSidecar(t, "--unix", socket, "--tcp", "off")
	eventually(t, 10*time.Second, "an add to the new sidecar", func() bool {
		return q.Add(context.Background(), "after-restart") == nil
	})
	eventually(t, 10*time.Second, "the worker to take a key from the new sidecar", func() bool {
		return len(rec.of("after-restart")) == 1
	})
	t.Logf("worker took a key %s after the new sidecar started", time.Since(restarted).Round(time.Millisecond))
}

func TestRunKeepsConcurrencyAcrossAReconnect(t *testing.T) {
	socket := t.TempDir() + "/wq.sock"
	first := startSidecar(t, "--unix", socket, "--tcp", "off")
	q := dial(t, first).Queue("default")
	release := make(chan struct{})
	rec := newRecorder(func(ctx context.Context, req workqueue.Request, _ int) (workqueue.Result, error) {
		if req.Key == "stubborn" {
			<-release // ignores its cancelled context
		}
		return workqueue.Result{}, nil
	})
	runWorker(t, q, 1, rec, workqueue.WithReconnectBackoff(50*time.Millisecond, 500*time.Millisecond))
	if err := q.Add(context.Background(), "stubborn"); err != nil {
		t.Fatal(err)
	}
	rec.waitStarted(t, 5*time.Second)
	first.Signal(syscall.SIGKILL)
	startSidecar(t, "--unix", socket, "--tcp", "off")
	eventually(t, 10*time.Second, "an add to the new sidecar", func() bool {
		return q.Add(context.Background(), "next") == nil
	})
	// The new stream opened with no credit: the stubborn reconcile still
	// holds the worker's only slot.
	time.Sleep(500 * time.Millisecond)
	if n := len(rec.of("next")); n != 0 {
		t.Fatalf("a second reconcile started while the first still ran (concurrency 1)")
	}
	if st := keyState(t, q, "next"); st.State != workqueue.KeyQueued {
		t.Errorf("next is %s; want queued, not leased to a worker without a free slot", st.State)
	}
	close(release)
	eventually(t, 5*time.Second, "the freed slot to become a credit and take the next key", func() bool {
		return len(rec.of("next")) == 1
	})
}
