package workqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// DefaultStopTimeout is how long [Queue.Run] waits for running reconciles
// after its context is cancelled: less than Kubernetes' default 30 s
// termination grace period, so the results still reach the sidecar.
const DefaultStopTimeout = 20 * time.Second

const (
	defaultMinBackoff = 100 * time.Millisecond
	defaultMaxBackoff = 10 * time.Second
	// openTimeout bounds the wait for Opened after Open: a sidecar that
	// accepted the stream answers at once.
	openTimeout = 10 * time.Second
	// closeTimeout bounds the wait for the sidecar to end the stream after
	// the worker half-closed it.
	closeTimeout = 5 * time.Second
	// defaultLeaseTTL stands in if the sidecar's Opened carries none.
	defaultLeaseTTL = 30 * time.Second
	// minExtendEvery keeps a tiny lease TTL from turning into a busy loop.
	minExtendEvery = 10 * time.Millisecond
)

// WorkOption configures how a worker takes leases: [Queue.Run], and
// [Queue.Get] for the options that apply to it.
type WorkOption func(*workConfig)

type workConfig struct {
	leaseTTL      time.Duration
	includeObject bool
	stopTimeout   time.Duration
	minBackoff    time.Duration
	maxBackoff    time.Duration
}

func newWorkConfig(opts []WorkOption) workConfig {
	cfg := workConfig{stopTimeout: DefaultStopTimeout, minBackoff: defaultMinBackoff, maxBackoff: defaultMaxBackoff}
	for _, opt := range opts {
		opt(&cfg)
	}
	return cfg
}

// WithLeaseTTL asks for leases of this length (kept within the sidecar's
// bounds); by default the queue's lease_ttl. Run extends each lease every
// third of it while the reconcile runs.
func WithLeaseTTL(ttl time.Duration) WorkOption {
	return func(c *workConfig) { c.leaseTTL = ttl }
}

// WithObject attaches each key's cached object to its [Request] (for queues
// whose sidecar config names a primary informer).
func WithObject() WorkOption {
	return func(c *workConfig) { c.includeObject = true }
}

// WithStopTimeout sets how long Run waits for running reconciles once its
// context is cancelled (default [DefaultStopTimeout]). Reconciles still
// running then are cancelled with [ErrLeaseLost] and their keys go back to
// the queue.
func WithStopTimeout(d time.Duration) WorkOption {
	return func(c *workConfig) { c.stopTimeout = d }
}

// WithReconnectBackoff sets the delays between attempts to reopen a broken
// Work stream: from initial, doubling, up to max (default 100 ms to 10 s).
// Run refuses initial <= 0 or max < initial.
func WithReconnectBackoff(initial, max time.Duration) WorkOption {
	return func(c *workConfig) { c.minBackoff, c.maxBackoff = initial, max }
}

// Run is a worker: it takes keys from the queue and calls r for each, at
// most concurrency at a time, until ctx is cancelled.
//
// It holds one Work stream to the sidecar with a window of concurrency
// leases, and runs r on a pool of concurrency goroutines. Each lease gets
// its own context; the lease is extended every third of its TTL while r
// runs (one ticker for the stream extends them all), and r's context is
// cancelled when the sidecar asks to stop ([ErrCancelled]) or the lease is
// lost ([ErrLeaseLost], see [context.Cause]). r's outcome finishes the lease
// (see [Result]). A panic in r is recovered and retried as an error.
//
// When the stream breaks (the sidecar restarted, say), the running
// reconciles' leases are gone: their contexts are cancelled, and Run opens a
// new stream after a backoff, logging each attempt.
//
// When ctx is cancelled Run stops taking keys, waits up to the stop timeout
// for running reconciles (their contexts are not cancelled by ctx; they
// carry its values), finishes their leases, closes the stream so that keys
// it still holds go back to the queue, and returns nil. Run returns an error
// only for what retrying cannot fix: an unknown queue ([ErrUnknownQueue]),
// a request the sidecar refuses ([ErrInvalidArgument]) or a sidecar without
// the Work RPC.
func (q *Queue) Run(ctx context.Context, concurrency int, r Reconciler, opts ...WorkOption) error {
	if concurrency < 1 {
		return fmt.Errorf("workqueue: run on %q: concurrency must be at least 1, not %d", q.name, concurrency)
	}
	if r == nil {
		return fmt.Errorf("workqueue: run on %q: nil Reconciler", q.name)
	}
	cfg := newWorkConfig(opts)
	if cfg.minBackoff <= 0 || cfg.maxBackoff < cfg.minBackoff {
		// A zero first delay never grows: a broken stream would be reopened in a tight loop.
		return fmt.Errorf("workqueue: run on %q: WithReconnectBackoff(%s, %s): want 0 < initial <= max", q.name, cfg.minBackoff, cfg.maxBackoff)
	}
	w := &worker{
		queue:       q,
		reconciler:  r,
		concurrency: concurrency,
		cfg:         cfg,
		keys:        map[string]chan struct{}{},
		log:         q.client.logger.With("queue", q.name),
	}
	w.ready = sync.NewCond(&w.readyMu)
	for range concurrency {
		go w.serveLeases()
	}
	defer w.quit()
	return w.run(ctx)
}

// worker is one Run: the reconnect loop around sessions (one Work stream
// each) and what outlives a session.
type worker struct {
	queue       *Queue
	reconciler  Reconciler
	concurrency int
	cfg         workConfig
	log         *slog.Logger

	// readyMu guards queued, the leases waiting for a goroutine of the pool
	// (oldest first), and quitting; ready wakes the pool's goroutines.
	readyMu  sync.Mutex
	ready    *sync.Cond
	queued   []*held
	quitting bool

	// mu guards busy, current and, with it, the current session's window.
	// busy counts the pool's goroutines working on a lease, across
	// sessions: a reconcile still running when its stream broke keeps its
	// goroutine, so a new stream's window leaves it out and the worker never
	// goes past concurrency. A goroutine freed by an older session's
	// reconcile becomes a Credit on the current one.
	mu      sync.Mutex
	busy    int
	current *session

	// keys are the keys reconciling in this process, each with a channel
	// closed when its reconcile returns. A lease for a key whose earlier
	// reconcile still runs (its lease lost, its context cancelled, and it
	// has not returned) waits for it: one key never runs twice at once here.
	keysMu sync.Mutex
	keys   map[string]chan struct{}
}

// claimKey waits until no other reconcile of key runs in this process and
// claims it; false when ctx ends first (the lease was lost, or the worker
// is stopping, while it waited).
func (w *worker) claimKey(ctx context.Context, key string) bool {
	for {
		w.keysMu.Lock()
		running, busy := w.keys[key]
		if !busy {
			w.keys[key] = make(chan struct{})
			w.keysMu.Unlock()
			return true
		}
		w.keysMu.Unlock()
		w.log.Info("waiting for the earlier reconcile of this key to return (its lease was lost, and it ignores its context)", "key", key)
		select {
		case <-running:
		case <-ctx.Done():
			return false
		}
	}
}

// releaseKey ends claimKey's claim on key.
func (w *worker) releaseKey(key string) {
	w.keysMu.Lock()
	close(w.keys[key])
	delete(w.keys, key)
	w.keysMu.Unlock()
}

// dispatch hands a lease to the pool: the first free goroutine takes it.
// It never blocks, so the stream's receiver keeps reading.
func (w *worker) dispatch(h *held) {
	w.readyMu.Lock()
	w.queued = append(w.queued, h)
	w.readyMu.Unlock()
	w.ready.Signal()
}

// serveLeases is one goroutine of the pool: it works on leases, one at a
// time, until Run returns.
func (w *worker) serveLeases() {
	for {
		w.readyMu.Lock()
		for len(w.queued) == 0 && !w.quitting {
			w.ready.Wait()
		}
		if w.quitting {
			w.readyMu.Unlock()
			return
		}
		h := w.queued[0]
		w.queued[0] = nil
		w.queued = w.queued[1:]
		w.readyMu.Unlock()
		h.s.work(h)
	}
}

// quit ends the pool's goroutines once they are free. Leases still queued
// belong to streams that have ended (lost, their keys back in the queue):
// they are dropped.
func (w *worker) quit() {
	w.readyMu.Lock()
	w.quitting = true
	dropped := w.queued
	w.queued = nil
	w.readyMu.Unlock()
	w.ready.Broadcast()
	for _, h := range dropped {
		h.s.forget(h)
	}
}

// acquire counts a goroutine of the pool as working on a lease.
func (w *worker) acquire() {
	w.mu.Lock()
	w.busy++
	w.mu.Unlock()
}

func (w *worker) run(ctx context.Context) error {
	delay := w.cfg.minBackoff
	for {
		started := time.Now()
		err := w.serveStream(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if w.queue.client.conn.GetState() == connectivity.Shutdown {
			// Client.Close: no stream can open on this connection again.
			return fmt.Errorf("workqueue: the client was closed: %w", err)
		}
		if permanent(err) {
			return err
		}
		if time.Since(started) > w.cfg.maxBackoff {
			delay = w.cfg.minBackoff
		}
		wait := jitter(delay)
		w.log.Warn("work stream ended; reopening", "err", err, "after", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		delay = min(2*delay, w.cfg.maxBackoff)
	}
}

// serveStream runs one session from Open to its end.
func (w *worker) serveStream(ctx context.Context) error {
	// The stream outlives ctx: a graceful stop half-closes it first.
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stream, err := w.queue.client.queue.Work(streamCtx)
	if err != nil {
		return wrap(queueService, w.queue.op("open work stream on"), err)
	}
	s := newSession(w, stream, cancel, context.WithoutCancel(ctx))
	if err := s.open(ctx); err != nil {
		return err
	}
	return s.serve(ctx)
}

// call runs the reconciler, turning a panic into an error.
func (w *worker) call(ctx context.Context, req Request) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("reconcile panicked", "key", req.Key, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return w.reconciler.Reconcile(ctx, req)
}

// release frees a goroutine of the pool (see acquire). One freed by an
// older session's reconcile is given to the current session as one more
// credit.
func (w *worker) release(from *session) {
	w.mu.Lock()
	w.busy--
	cur := w.current
	grant := cur != nil && cur != from && cur.window < cur.maxWindow
	if grant {
		cur.window++
	}
	w.mu.Unlock()
	if grant {
		cur.credit(1)
	}
}

// permanent reports errors that reopening the stream cannot fix.
func permanent(err error) bool {
	if errors.Is(err, ErrUnknownQueue) || errors.Is(err, ErrInvalidArgument) || errors.Is(err, errors.ErrUnsupported) {
		return true
	}
	switch status.Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

// jitter spreads d by ±20%, so that workers do not reconnect in lockstep.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
