package workqueue

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueuev1"
)

// Lease is one key taken with [Queue.Get]: the right to process it until
// Deadline. End it with Finish or Done, or keep it with Extend; a lease left
// alone expires and its key goes back to the queue as a failure. [Queue.Run]
// does all of this by itself; Get is for scripts and one-off tools.
type Lease struct {
	Request
	// Token is the lease's fencing token: unique per grant, presented by
	// Done, Finish and Extend.
	Token uint64
	// Deadline is when the lease ends unless extended, by this machine's
	// clock (the sidecar's time-to-live added to the time of receipt).
	Deadline time.Time

	queue *Queue
}

// Get takes one ready key, waiting up to wait for one (at most the
// sidecar's cap); [ErrNoKey] when none became ready. [WithLeaseTTL] and
// [WithObject] apply; other options are ignored.
func (q *Queue) Get(ctx context.Context, wait time.Duration, opts ...WorkOption) (*Lease, error) {
	cfg := newWorkConfig(opts)
	req := &workqueuev1.GetRequest{
		Queue:         q.name,
		Worker:        q.client.worker,
		MaxKeys:       1,
		Wait:          durationpb.New(wait),
		IncludeObject: cfg.includeObject,
	}
	if cfg.leaseTTL > 0 {
		req.LeaseTtl = durationpb.New(cfg.leaseTTL)
	}
	received := time.Now()
	resp, err := q.client.queue.Get(ctx, req)
	if err != nil {
		return nil, wrap(queueService, q.op("get from"), err)
	}
	if len(resp.GetLeases()) == 0 {
		return nil, fmt.Errorf("workqueue: get from %q: %w within %s", q.name, ErrNoKey, wait)
	}
	l := resp.GetLeases()[0]
	return &Lease{
		Request:  requestFromLease(q, l),
		Token:    l.GetToken(),
		Deadline: received.Add(l.GetTtl().AsDuration()),
		queue:    q,
	}, nil
}

// Done ends the lease without touching the key's failure count (client-go
// Done). [ErrStaleLease] when the lease had already ended.
func (l *Lease) Done(ctx context.Context) error {
	_, err := l.queue.client.queue.Done(ctx, &workqueuev1.DoneRequest{Queue: l.queue.name, Key: l.Key, Token: l.Token})
	return wrap(queueService, l.queue.op("done in")+" key "+l.Key, err)
}

// Finish ends the lease with a reconcile's outcome, as [Queue.Run] does: a
// non-nil reconcileErr retries with backoff, a positive res.RequeueAfter
// requeues after that delay, anything else is success. [ErrStaleLease] when
// the lease had already ended; nothing changes then.
func (l *Lease) Finish(ctx context.Context, res Result, reconcileErr error) error {
	req := &workqueuev1.FinishRequest{Queue: l.queue.name, Key: l.Key, Token: l.Token}
	switch {
	case reconcileErr != nil:
		req.Outcome = &workqueuev1.FinishRequest_Retry{Retry: &workqueuev1.Retry{Error: reconcileErr.Error()}}
	case res.RequeueAfter > 0:
		req.Outcome = &workqueuev1.FinishRequest_RequeueAfter{RequeueAfter: &workqueuev1.RequeueAfter{Delay: durationpb.New(res.RequeueAfter)}}
	default:
		req.Outcome = &workqueuev1.FinishRequest_Success{Success: &workqueuev1.Success{}}
	}
	_, err := l.queue.client.queue.Finish(ctx, req)
	return wrap(queueService, l.queue.op("finish in")+" key "+l.Key, err)
}

// Extend moves the lease's deadline to now + ttl (0: the queue's default).
// cancel reports that the sidecar asks the worker to stop working on the key
// and finish the lease soon. [ErrStaleLease] when the lease had ended.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) (cancel bool, err error) {
	req := &workqueuev1.ExtendRequest{Queue: l.queue.name, Key: l.Key, Token: l.Token}
	if ttl > 0 {
		req.Ttl = durationpb.New(ttl)
	}
	sent := time.Now()
	resp, err := l.queue.client.queue.Extend(ctx, req)
	if err != nil {
		return false, wrap(queueService, l.queue.op("extend in")+" key "+l.Key, err)
	}
	l.Deadline = sent.Add(resp.GetTtl().AsDuration())
	return resp.GetCancel(), nil
}
