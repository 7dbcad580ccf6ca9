package workqueue

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueuev1"
)

// errStreamClosed is a send on a stream this worker already half-closed.
var errStreamClosed = errors.New("work stream closed")

// session is one Work stream: its leases and the messages that travel both
// ways. The worker's pool of goroutines runs the reconciles.
type session struct {
	w      *worker
	stream grpc.BidiStreamingClient[workqueuev1.WorkRequest, workqueuev1.WorkResponse]
	// endStream cancels the stream's call: the last step of every ending.
	endStream context.CancelFunc
	// base is the parent of every reconcile context: Run's context without
	// its cancellation, so values pass and a graceful stop can wait.
	base context.Context

	// extendEvery is a third of the stream's lease TTL (from Opened): each
	// held lease is extended that long after it arrived or was last
	// extended, by the session's one loop (leaseLoop).
	extendEvery time.Duration
	// nextCheck is when leaseLoop wakes next, in Unix nanoseconds; a lease
	// whose deadline comes sooner wakes it through wake.
	nextCheck atomic.Int64
	wake      chan struct{}

	// window is the credits granted so far and maxWindow their ceiling;
	// both guarded by w.mu (see worker.release).
	window    int
	maxWindow int

	// sendMu serialises sends: a gRPC stream allows one sender at a time.
	sendMu sync.Mutex
	closed bool // half-closed; guarded by sendMu
	// extendsSent counts the Extends sent; guarded by sendMu.
	extendsSent uint64

	mu     sync.Mutex
	leases map[uint64]*held // by token
	// stopping is set when the graceful stop begins: leases not yet started
	// stay unstarted and go back when the stream closes.
	stopping bool
	// running counts this session's reconciles that have started and not
	// yet been finished; Add only under mu while not stopping.
	running sync.WaitGroup
	// givenUp tells the sidecar's refusals of the Finishes of leases this
	// worker gave up, expected, from the others.
	givenUp givenUpFinishes
	// ended closes when serve returns: leaseLoop stops.
	ended chan struct{}
}

// held is one lease the session holds.
type held struct {
	s        *session
	lease    *workqueuev1.Lease
	key      string
	token    uint64
	failures uint32 // the key's failures when leased, for logs
	// ctx is the reconcile's context (a pointer to it is, without another
	// allocation); cancel cancels it.
	ctx    leaseContext
	cancel context.CancelCauseFunc
	// lost: the lease ended without this worker (or a graceful stop gave
	// it back unstarted); its result is not sent, a Finish saying it was
	// lost is.
	lost atomic.Bool
	// deadline is the lease's end by the local clock, in Unix nanoseconds:
	// the sidecar's deadline, never later than arrival (or the extend's
	// answer) plus the TTL it gave. When it passes unextended, leaseLoop
	// cancels the reconcile (ErrLeaseLost): a reconcile never runs on past
	// its lease.
	deadline atomic.Int64
	// nextExtend is when leaseLoop sends this lease's next Extend, in Unix
	// nanoseconds; guarded by the session's mu.
	nextExtend int64
}

// Why a lease was lost: the why of its log line.
const (
	// lostExpired: its deadline passed unextended, or the sidecar refused
	// an Extend as it no longer held the lease.
	lostExpired = "expired"
	// lostRevoked: the sidecar ended it and sent a Cancel (expired there,
	// or a drain's end).
	lostRevoked      = "revoked"
	lostStreamBroken = "stream broken"
	// lostStopTimeout: the graceful stop's timeout passed while it ran.
	lostStopTimeout = "stop timeout"
	// lostEndedDuringWrite: the reconcile returned ErrLeaseEndedDuringWrite
	// (wrapped or not): a write under the lease was made, but the lease
	// ended on the sidecar before the API server answered it.
	lostEndedDuringWrite = "lease ended during write"
)

// lose ends the lease without this worker: its reconcile's context is
// cancelled with ErrLeaseLost and its result will be discarded. It logs the
// loss, once: a worker often hears of one loss several times (the deadline
// passes, then the sidecar's Cancel, a refused Extend or the stream's end
// arrive, then the reconcile returns), and one loss is one line.
func (h *held) lose(why string, err error) {
	if !h.lost.CompareAndSwap(false, true) {
		return
	}
	h.cancel(ErrLeaseLost)
	args := []any{"key", h.key, "why", why}
	if err != nil {
		args = append(args, "err", err)
	}
	h.s.w.log.Warn("lease lost; its reconcile is cancelled and its result discarded", args...)
}

// handBack ends a lease that a graceful stop gives back unstarted (or
// whose loss was logged already): as a lost one's, its context is
// cancelled with ErrLeaseLost, but nothing went wrong, so nothing is logged.
func (h *held) handBack() {
	h.lost.Store(true)
	h.cancel(ErrLeaseLost)
}

// until is the lease's deadline.
func (h *held) until() time.Time {
	return time.Unix(0, h.deadline.Load())
}

// expired reports whether the lease's deadline has passed by the wall clock
// (timers fire late after the process was stopped; the clock does not lie).
func (h *held) expired(now time.Time) bool {
	return !now.Before(h.until())
}

// setDeadline moves the lease's end to the earlier of the sidecar's deadline
// (when given) and now + ttl, and wakes the session's leaseLoop if it comes
// before the loop's next check (it seldom does: the loop checks at least
// every sixth of the TTL).
func (h *held) setDeadline(now time.Time, sidecar *timestamppb.Timestamp, ttl time.Duration) {
	deadline := now.Add(ttl)
	if sidecar != nil && sidecar.IsValid() && sidecar.AsTime().Before(deadline) {
		deadline = sidecar.AsTime()
	}
	ns := deadline.UnixNano()
	h.deadline.Store(ns)
	if ns < h.s.nextCheck.Load() {
		select {
		case h.s.wake <- struct{}{}:
		default:
		}
	}
}

// leaseContext is a reconcile's context: cancelled when the lease ends, and
// its Deadline the lease's current deadline, moved by every extend, so a
// reconcile can check before it commits that its lease still holds.
type leaseContext struct {
	context.Context
	h *held
}

func (c leaseContext) Deadline() (time.Time, bool) {
	return c.h.until(), true
}

// Err reads the clock against the lease's deadline when asked, not only the
// cancel that leaseLoop's timer delivers: after the process was stopped
// (SIGSTOP, a paused VM) timers fire in any order, and a reconcile asking
// first saw nil though its lease had ended and another worker held the key.
func (c leaseContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if c.h.expired(time.Now()) {
		return context.DeadlineExceeded
	}
	return nil
}

func newSession(w *worker, stream grpc.BidiStreamingClient[workqueuev1.WorkRequest, workqueuev1.WorkResponse],
	endStream context.CancelFunc, base context.Context) *session {
	return &session{
		w:         w,
		stream:    stream,
		endStream: endStream,
		base:      base,
		leases:    make(map[uint64]*held),
		ended:     make(chan struct{}),
		wake:      make(chan struct{}, 1),
	}
}

// open sends Open with the free slots as the window and waits for Opened.
func (s *session) open(ctx context.Context) error {
	w := s.w
	open := &workqueuev1.WorkRequest_Open{
		Queue:         w.queue.name,
		Worker:        w.queue.client.worker,
		IncludeObject: w.cfg.includeObject,
		// Nothing waits on a Finish's answer: a refusal is only logged
		// (onFinishAck). So the sidecar answers only those, one message
		// less per lease; a sidecar older than the field answers them all,
		// which changes nothing here.
		AckFailuresOnly: true,
	}
	if w.cfg.leaseTTL > 0 {
		open.LeaseTtl = durationpb.New(w.cfg.leaseTTL)
	}
	// Under w.mu, so that a slot freed meanwhile either counts in this
	// window or becomes a Credit sent after Open.
	w.mu.Lock()
	s.window = w.concurrency - w.busy
	s.maxWindow = w.concurrency
	open.Credits = uint32(s.window)
	err := s.send(&workqueuev1.WorkRequest{Kind: &workqueuev1.WorkRequest_Open_{Open: open}})
	if err == nil {
		w.current = s
	}
	w.mu.Unlock()
	if err != nil {
		return wrap(queueService, w.queue.op("open work stream on"), err)
	}

	stopOnCancel := context.AfterFunc(ctx, s.endStream)
	timeout := time.AfterFunc(openTimeout, s.endStream)
	resp, err := s.stream.Recv()
	stopOnCancel()
	timeout.Stop()
	if err != nil {
		s.detach()
		return wrap(queueService, w.queue.op("open work stream on"), err)
	}
	opened := resp.GetOpened()
	if opened == nil {
		s.detach()
		return wrap(queueService, w.queue.op("open work stream on"), errors.New("the sidecar's first message is not Opened"))
	}
	ttl := opened.GetLeaseTtl().AsDuration()
	if ttl <= 0 {
		ttl = defaultLeaseTTL
	}
	s.extendEvery = max(ttl/3, minExtendEvery)
	if limit := int(opened.GetMaxCredits()); limit > 0 && limit < w.concurrency {
		w.log.Warn("concurrency is over the sidecar's window; capped", "concurrency", w.concurrency, "max_credits", limit)
		w.mu.Lock()
		s.maxWindow = limit
		s.window = min(s.window, limit)
		w.mu.Unlock()
	}
	w.log.Info("work stream open", "worker", w.queue.client.worker, "credits", opened.GetCredits(), "lease_ttl", ttl)
	return nil
}

// serve runs until the stream breaks (returning why) or ctx is cancelled
// (stopping gracefully, returning nil).
func (s *session) serve(ctx context.Context) error {
	defer close(s.ended)
	go s.leaseLoop()
	broke := make(chan error, 1)
	go func() { broke <- s.receive() }()
	select {
	case err := <-broke:
		// Each lease held is logged as lost; Run logs the stream's end.
		s.end(err)
		return err
	case <-ctx.Done():
		s.stop(broke)
		return nil
	}
}

// receive reads the sidecar's messages until the stream ends.
func (s *session) receive() error {
	for {
		resp, err := s.stream.Recv()
		if errors.Is(err, io.EOF) {
			return errors.New("the sidecar ended the work stream")
		}
		if err != nil {
			return wrap(queueService, s.w.queue.op("work stream on"), err)
		}
		switch kind := resp.GetKind().(type) {
		case *workqueuev1.WorkResponse_Lease:
			s.onLease(kind.Lease)
		case *workqueuev1.WorkResponse_Extended_:
			s.onExtended(kind.Extended)
		case *workqueuev1.WorkResponse_FinishAck_:
			s.onFinishAck(kind.FinishAck)
		case *workqueuev1.WorkResponse_Cancel_:
			s.onCancel(kind.Cancel)
		}
	}
}

func (s *session) onLease(l *workqueuev1.Lease) {
	received := time.Now()
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		s.w.log.Debug("lease arrived while stopping; it goes back when the stream closes", "key", l.GetKey())
		return
	}
	ctx, cancel := context.WithCancelCause(s.base)
	h := &held{s: s, lease: l, key: l.GetKey(), token: l.GetToken(), failures: l.GetFailures(), cancel: cancel}
	h.ctx = leaseContext{Context: ctx, h: h}
	ttl := l.GetTtl().AsDuration()
	if ttl <= 0 {
		ttl = 3 * s.extendEvery // the stream's TTL, from Opened
	}
	h.setDeadline(received, l.GetDeadline(), ttl)
	h.nextExtend = received.Add(s.extendEvery).UnixNano()
	s.leases[h.token] = h
	s.mu.Unlock()
	s.w.dispatch(h)
}

// leaseLoop keeps the session's leases, one timer for them all. Every
// sixth of the TTL it extends each held lease (waiting for a goroutine or
// reconciling) whose arrival or last Extend is a third of the TTL old, so
// an Extend goes out a third to a half of the TTL after the last; and it
// wakes at the earliest deadline sooner than that, to cancel the reconcile
// of a lease whose deadline passed unextended (a worker stopped with
// SIGSTOP, say, or a sidecar that does not answer). A lease that lives less
// than a third of its TTL costs it nothing.
func (s *session) leaseLoop() {
	tick := max(s.extendEvery/2, minExtendEvery)
	s.nextCheck.Store(time.Now().Add(tick).UnixNano())
	timer := time.NewTimer(tick)
	defer timer.Stop()
	var due []*held
	for {
		select {
		case <-s.ended:
			return
		case <-timer.C:
		case <-s.wake:
		}
		now := time.Now().UnixNano()
		next := now + int64(tick)
		due = due[:0]
		s.mu.Lock()
		for _, h := range s.leases {
			if h.lost.Load() {
				continue
			}
			deadline := h.deadline.Load()
			if now >= deadline {
				h.lose(lostExpired, nil)
				continue
			}
			if now >= h.nextExtend {
				h.nextExtend = now + int64(s.extendEvery)
				due = append(due, h)
			}
			next = min(next, deadline)
		}
		s.nextCheck.Store(next)
		s.mu.Unlock()
		for _, h := range due {
			s.extend(h)
		}
		clear(due)
		timer.Reset(time.Duration(next - now)) // no stale tick since Go 1.23
	}
}

func (s *session) lookup(token uint64) *held {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leases[token]
}

func (s *session) onExtended(e *workqueuev1.WorkResponse_Extended) {
	s.givenUp.extendAnswered()
	h := s.lookup(e.GetToken())
	if h == nil {
		return
	}
	switch codes.Code(e.GetCode()) {
	case codes.OK:
		h.setDeadline(time.Now(), e.GetDeadline(), e.GetTtl().AsDuration())
		if e.GetCancel() {
			// Debug, as a Cancel's: see onCancel.
			s.w.log.Debug("sidecar asks to stop working on the key", "key", h.key)
			h.cancel(ErrCancelled)
		}
	case codes.FailedPrecondition:
		h.lose(lostExpired, codeError("extend", e.GetCode(), e.GetMessage()))
	default:
		s.w.log.Warn("extending a lease failed", "key", h.key, "err", codeError("extend", e.GetCode(), e.GetMessage()))
	}
}

func (s *session) onFinishAck(a *workqueuev1.WorkResponse_FinishAck) {
	if a.GetCode() == int32(codes.OK) {
		return
	}
	err := codeError("finish", a.GetCode(), a.GetMessage())
	if s.givenUp.refused(a.GetToken()) {
		// Expected: the lease was lost (and logged so); its credit is back.
		s.w.log.Debug("the sidecar refused the finish of a lease this worker had given up", "key", a.GetKey(), "err", err)
		return
	}
	s.w.log.Warn("the sidecar refused a finish", "key", a.GetKey(), "err", err)
}

func (s *session) onCancel(c *workqueuev1.WorkResponse_Cancel) {
	h := s.lookup(c.GetToken())
	if h == nil {
		return
	}
	if c.GetRevoked() {
		var why error
		if c.GetMessage() != "" {
			why = errors.New(c.GetMessage())
		}
		h.lose(lostRevoked, why)
		return
	}
	if h.lost.Load() {
		return // its reconcile was cancelled already, as lost
	}
	// The lease stays valid and nothing went wrong, so debug: the sidecar
	// asks back every lease at once when it stops, or those of every shard
	// slot that moved to another replica (up to 4,096), one Cancel each.
	// The reconcile learns it from context.Cause (ErrCancelled).
	s.w.log.Debug("sidecar asks to stop working on the key", "key", h.key, "why", c.GetMessage())
	h.cancel(ErrCancelled)
}

// outcome is what a reconcile returned.
type outcome struct {
	res Result
	err error
}

// work runs one lease on a goroutine of the worker's pool, which is free:
// the reconcile, then its Finish. The extend loop keeps the lease meanwhile,
// and kept it while it waited for a free goroutine (usually it waits not at
// all; it does when reconciles of a broken or revoked stream still run).
func (s *session) work(h *held) {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		s.forget(h)
		return // never started; goes back when the stream closes
	}
	if h.lost.Load() {
		s.mu.Unlock()
		s.forget(h)
		s.finishLost(h) // lost before it started
		return
	}
	// A lease asked to stop but still ours runs all the same, its context
	// already cancelled, so that it is finished.
	s.running.Add(1)
	s.mu.Unlock()
	defer s.running.Done()

	w := s.w
	w.acquire()
	// A lease that expired while it waited (or while this process was
	// stopped) is another worker's by now: never start it.
	if h.expired(time.Now()) {
		h.lose(lostExpired, nil)
		w.release(s)
		s.forget(h)
		s.finishLost(h)
		return
	}
	if !w.claimKey(&h.ctx, h.key) {
		// Never started: lost while an earlier reconcile of its key still
		// ran here (it is finished as lost), or the worker is stopping (it
		// goes back when the stream closes).
		w.release(s)
		s.forget(h)
		if h.lost.Load() {
			s.finishLost(h)
		}
		return
	}
	res, err := w.call(&h.ctx, requestFromLease(w.queue, h.lease))
	w.releaseKey(h.key)
	w.release(s)
	// Out of the session's leases before its Finish is sent, so the extend
	// loop sends no Extend after it.
	s.forget(h)
	s.finish(h, outcome{res, err})
}

// forget drops a lease from the session's leases once its reconcile is over
// or will not run, and frees its context (a cause set earlier stays).
func (s *session) forget(h *held) {
	s.mu.Lock()
	delete(s.leases, h.token)
	s.mu.Unlock()
	h.cancel(context.Canceled) // frees the context; a first cause stays
}

func (s *session) extend(h *held) {
	if h.lost.Load() {
		return
	}
	err := s.send(&workqueuev1.WorkRequest{Kind: &workqueuev1.WorkRequest_Extend_{
		Extend: &workqueuev1.WorkRequest_Extend{Key: h.key, Token: h.token},
	}})
	if err != nil {
		s.w.log.Debug("extend not sent", "key", h.key, "err", err)
	}
}

func (s *session) finish(h *held, o outcome) {
	log := s.w.log
	if !h.lost.Load() && h.expired(time.Now()) {
		// Returned after the deadline, before leaseLoop saw it pass.
		h.lose(lostExpired, nil)
	}
	if errors.Is(o.err, ErrLeaseEndedDuringWrite) {
		// The sidecar ended the lease while a write under it was out (its
		// Cancel may not have arrived yet): the lease is lost, its outcome
		// is not sent (the sidecar would refuse it as stale, a warning) but
		// a lost lease's Finish is, whose refusal is expected.
		h.lose(lostEndedDuringWrite, o.err)
	}
	if h.lost.Load() {
		// The loss was logged when it happened.
		log.Debug("reconcile returned after its lease was lost; result discarded", "key", h.key, "err", o.err)
		s.finishLost(h)
		return
	}
	if o.err != nil {
		log.Error("reconcile failed", "key", h.key, "failures_before", h.failures, "err", o.err)
	}
	finish := &workqueuev1.WorkRequest_Finish{Key: h.key, Token: h.token}
	switch {
	case o.err != nil:
		finish.Outcome = &workqueuev1.WorkRequest_Finish_Retry{Retry: &workqueuev1.Retry{Error: o.err.Error()}}
	case o.res.RequeueAfter > 0:
		finish.Outcome = &workqueuev1.WorkRequest_Finish_RequeueAfter{
			RequeueAfter: &workqueuev1.RequeueAfter{Delay: durationpb.New(o.res.RequeueAfter)},
		}
	default:
		finish.Outcome = &workqueuev1.WorkRequest_Finish_Success{Success: &workqueuev1.Success{}}
	}
	if err := s.send(&workqueuev1.WorkRequest{Kind: &workqueuev1.WorkRequest_Finish_{Finish: finish}}); err != nil {
		log.Warn("finish not sent; the key goes back to the queue", "key", h.key, "err", err)
	}
}

// finishLost answers a lease that ended without this worker with a Finish
// all the same: the sidecar refuses it (FAILED_PRECONDITION, nothing changes)
// and gives the lease's credit back. Every lease gets exactly one Finish, so
// the sidecar can tell a worker that stopped reading from one that heard.
func (s *session) finishLost(h *held) {
	finish := &workqueuev1.WorkRequest_Finish{Key: h.key, Token: h.token, Outcome: &workqueuev1.WorkRequest_Finish_Retry{
		Retry: &workqueuev1.Retry{Error: "lease lost before the worker finished"},
	}}
	s.sendMu.Lock()
	s.givenUp.add(h.token, s.extendsSent)
	err := s.sendLocked(&workqueuev1.WorkRequest{Kind: &workqueuev1.WorkRequest_Finish_{Finish: finish}})
	if err != nil {
		s.givenUp.remove(h.token)
	}
	s.sendMu.Unlock()
	if err != nil {
		s.w.log.Debug("finish of a lost lease not sent", "key", h.key, "err", err)
	}
}

func (s *session) credit(n uint32) {
	err := s.send(&workqueuev1.WorkRequest{Kind: &workqueuev1.WorkRequest_Credit_{
		Credit: &workqueuev1.WorkRequest_Credit{Credits: n},
	}})
	if err != nil {
		s.w.log.Debug("credit not sent", "err", err)
	}
}

func (s *session) send(req *workqueuev1.WorkRequest) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.sendLocked(req)
}

// sendLocked is send with sendMu held. It counts the Extends sent, which
// tells when the sidecar has handled a given-up lease's Finish (givenUp).
func (s *session) sendLocked(req *workqueuev1.WorkRequest) error {
	if s.closed {
		return errStreamClosed
	}
	if err := s.stream.Send(req); err != nil {
		return err
	}
	if req.GetExtend() != nil {
		s.extendsSent++
	}
	return nil
}

// closeSend half-closes the stream: the sidecar returns what it still holds
// and ends the stream.
func (s *session) closeSend() {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if !s.closed {
		s.closed = true
		_ = s.stream.CloseSend()
	}
}

// detach stops this session from receiving credits for freed slots.
func (s *session) detach() {
	s.w.mu.Lock()
	if s.w.current == s {
		s.w.current = nil
	}
	s.w.mu.Unlock()
}

// end detaches the session, ends every lease it holds (cancelling running
// reconciles) and ends the call. broke is why the stream broke, each lease
// then logged as lost; nil for a graceful stop's end, whose leases left were
// never started (or were logged lost at the stop timeout).
func (s *session) end(broke error) {
	s.detach()
	s.mu.Lock()
	for _, h := range s.leases {
		if broke != nil {
			h.lose(lostStreamBroken, broke)
		} else {
			h.handBack()
		}
	}
	s.mu.Unlock()
	s.endStream()
}

// stop is the graceful end: take no new lease, wait (bounded) for running
// reconciles and their Finishes, half-close, wait for the sidecar to end the
// stream.
func (s *session) stop(broke <-chan error) {
	log := s.w.log
	s.detach()
	s.mu.Lock()
	s.stopping = true
	n := len(s.leases)
	s.mu.Unlock()
	log.Info("stopping: no new keys; waiting for running reconciles", "running", n, "timeout", s.w.cfg.stopTimeout)

	idle := make(chan struct{})
	go func() {
		s.running.Wait()
		close(idle)
	}()
	timer := time.NewTimer(s.w.cfg.stopTimeout)
	defer timer.Stop()
	select {
	case <-idle:
	case err := <-broke:
		s.end(err)
		return
	case <-timer.C:
		// Each running reconcile's lease is logged as lost; their keys go
		// back to the queue when the stream closes.
		s.mu.Lock()
		for _, h := range s.leases {
			h.lose(lostStopTimeout, nil)
		}
		s.mu.Unlock()
	}

	s.closeSend()
	select {
	case <-broke:
	case <-time.After(closeTimeout):
		log.Warn("the sidecar did not end the work stream after the worker closed it", "waited", closeTimeout)
	}
	s.end(nil)
	log.Info("stopped")
}
