package workqueue

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueuev1"
)

// Queue is a handle on one of the sidecar's named queues. It is cheap: make
// one wherever it is needed. Its methods are client-go's workqueue
// operations, each one call to the sidecar.
type Queue struct {
	client   *Client
	name     string
	priority *int32
	reason   string
}

// QueueOption configures the adds made through a [Queue] handle.
type QueueOption func(*Queue)

// WithPriority queues keys added through the handle at this priority
// (higher first); by default the queue's priority for manual adds.
func WithPriority(priority int32) QueueOption {
	return func(q *Queue) { q.priority = &priority }
}

// WithReason labels keys added through the handle: the workers see it as
// the source of the add's reason (e.g. "backfill-job").
func WithReason(reason string) QueueOption {
	return func(q *Queue) { q.reason = reason }
}

// Queue returns a handle on the named queue. It does not check that the
// queue exists: calls on an unknown queue fail with [ErrUnknownQueue].
func (c *Client) Queue(name string, opts ...QueueOption) *Queue {
	q := &Queue{client: c, name: name}
	for _, opt := range opts {
		opt(q)
	}
	return q
}

// Name is the queue's name.
func (q *Queue) Name() string { return q.name }

func (q *Queue) op(what string) string { return fmt.Sprintf("%s %q", what, q.name) }

// Add queues keys to be processed now (client-go Add). A queued key keeps
// the higher priority; a key held by a worker is queued again when its lease
// ends. The batch is all or nothing.
func (q *Queue) Add(ctx context.Context, keys ...string) error {
	_, err := q.client.queue.Add(ctx, &workqueuev1.AddRequest{
		Queue: q.name, Keys: keys, Priority: q.priority, Reason: q.reason,
	})
	return wrap(queueService, q.op("add to"), err)
}

// AddAfter queues keys once delay has passed (client-go AddAfter); a key
// already waiting keeps the earlier ready time.
func (q *Queue) AddAfter(ctx context.Context, delay time.Duration, keys ...string) error {
	_, err := q.client.queue.AddAfter(ctx, &workqueuev1.AddAfterRequest{
		Queue: q.name, Keys: keys, Delay: durationpb.New(delay), Priority: q.priority, Reason: q.reason,
	})
	return wrap(queueService, q.op("add after to"), err)
}

// Backoff is the rate limiter's decision for one key of AddRateLimited.
type Backoff struct {
	Key      string
	Failures int           // including this one
	Delay    time.Duration // the rate limiter's delay; the key is ready after it unless due sooner already
}

// AddRateLimited counts a failure for each key and queues it after the
// queue's rate limiter delay (client-go AddRateLimited). It reports the
// decision per distinct key, in order.
func (q *Queue) AddRateLimited(ctx context.Context, keys ...string) ([]Backoff, error) {
	resp, err := q.client.queue.AddRateLimited(ctx, &workqueuev1.AddRateLimitedRequest{
		Queue: q.name, Keys: keys, Priority: q.priority, Reason: q.reason,
	})
	if err != nil {
		return nil, wrap(queueService, q.op("add rate limited to"), err)
	}
	out := make([]Backoff, 0, len(resp.GetKeys()))
	for _, k := range resp.GetKeys() {
		out = append(out, Backoff{Key: k.GetKey(), Failures: int(k.GetFailures()), Delay: k.GetDelay().AsDuration()})
	}
	return out, nil
}

// Forget clears a key's failure count (client-go Forget); the key stays
// wherever it is.
func (q *Queue) Forget(ctx context.Context, key string) error {
	_, err := q.client.queue.Forget(ctx, &workqueuev1.ForgetRequest{Queue: q.name, Key: key})
	return wrap(queueService, q.op("forget in"), err)
}

// NumRequeues is how many times a key failed since it was last forgotten
// (client-go NumRequeues); 0 for a key the queue does not know.
func (q *Queue) NumRequeues(ctx context.Context, key string) (int, error) {
	resp, err := q.client.queue.NumRequeues(ctx, &workqueuev1.NumRequeuesRequest{Queue: q.name, Key: key})
	if err != nil {
		return 0, wrap(queueService, q.op("num requeues in"), err)
	}
	return int(resp.GetNumRequeues()), nil
}

// Counts is a queue's size at one instant.
type Counts struct {
	Ready   int // ready to be handed out: client-go's Len
	Waiting int // waiting for a delay or backoff
	Held    int // held by workers under a lease
	Dirty   int // held, and added again meanwhile
	// Settling counts keys whose lease ended after writes made under it,
	// not handed out until the sidecar's caches have seen them.
	Settling int
	// ReadyByPriority breaks Ready down, highest priority first.
	ReadyByPriority []PriorityCount
}

// PriorityCount is how many ready keys have one priority.
type PriorityCount struct {
	Priority int32
	Count    int
}

// Len reports the queue's counts; Counts.Ready is client-go's Len.
func (q *Queue) Len(ctx context.Context) (Counts, error) {
	resp, err := q.client.queue.Len(ctx, &workqueuev1.LenRequest{Queue: q.name})
	if err != nil {
		return Counts{}, wrap(queueService, q.op("len of"), err)
	}
	counts := Counts{
		Ready:    int(resp.GetReady()),
		Waiting:  int(resp.GetWaiting()),
		Held:     int(resp.GetHeld()),
		Dirty:    int(resp.GetDirty()),
		Settling: int(resp.GetSettling()),
	}
	for _, p := range resp.GetReadyByPriority() {
		counts.ReadyByPriority = append(counts.ReadyByPriority, PriorityCount{Priority: p.GetPriority(), Count: int(p.GetCount())})
	}
	return counts, nil
}

// KeyState is where a key is in its queue.
type KeyState int

// Where a key can be.
const (
	KeyAbsent  KeyState = KeyState(workqueuev1.KeyState_KEY_STATE_ABSENT)
	KeyQueued  KeyState = KeyState(workqueuev1.KeyState_KEY_STATE_QUEUED)
	KeyWaiting KeyState = KeyState(workqueuev1.KeyState_KEY_STATE_WAITING)
	KeyHeld    KeyState = KeyState(workqueuev1.KeyState_KEY_STATE_HELD)
	// KeySettling: the key's last lease ended after writes made under it
	// ([Request.Objects]); it is not handed out again until the sidecar's
	// caches have seen them, or until SettlingUntil.
	KeySettling KeyState = KeyState(workqueuev1.KeyState_KEY_STATE_SETTLING)
)

// String is "absent", "queued", "waiting", "held" or "settling".
func (s KeyState) String() string {
	switch s {
	case KeyAbsent:
		return "absent"
	case KeyQueued:
		return "queued"
	case KeyWaiting:
		return "waiting"
	case KeyHeld:
		return "held"
	case KeySettling:
		return "settling"
	default:
		return fmt.Sprintf("KeyState(%d)", int(s))
	}
}

// KeyStatus describes one key. Times that do not apply to its state are
// zero.
type KeyStatus struct {
	State     KeyState
	Priority  int32
	Failures  int
	LastError string
	Reasons   []Reason
	// QueuedSince is when a queued key became ready.
	QueuedSince time.Time
	// WaitingUntil is when a waiting key becomes ready.
	WaitingUntil time.Time
	// HeldUntil is a held key's lease deadline, and Holder its worker.
	HeldUntil time.Time
	Holder    string
	// Dirty: the held (or settling) key was added again and is queued when
	// the lease ends (or it has settled).
	Dirty bool
	// SettlingUntil is the latest a settling key waits for the caches to see
	// its writes; it is queued (or forgotten) then at the latest.
	SettlingUntil time.Time
	// Shard is where the key belongs among the replicas of a shard group;
	// nil unless the queue is sharded (shard_by in the sidecar's config).
	Shard *ShardPlace
}

// ShardPlace says which shard slot a key of a sharded queue falls in and
// which replica owns that slot, as the asked sidecar last read its group's
// Leases.
type ShardPlace struct {
	// Slot is the key's shard slot, 0 to 4095, when SlotKnown. It is not
	// known for a queue sharded by uid whose key's object the sidecar has
	// not cached (nor kept a tombstone of); such a key is not granted.
	Slot      int
	SlotKnown bool
	// Owner is the identity of the replica the slot is assigned to; empty
	// when the slot is not known or no replica is live. During a handover
	// the previous owner may still be draining it.
	Owner string
	// GrantedHere: the asked sidecar holds the slot and grants the key now.
	GrantedHere bool
}

// Has reports whether the key is queued (or held) for the given reason.
func (s KeyStatus) Has(kind ReasonKind) bool {
	return hasReason(s.Reasons, kind)
}

// KeyState reports where a key is, its failures and last error.
func (q *Queue) KeyState(ctx context.Context, key string) (KeyStatus, error) {
	resp, err := q.client.queue.KeyState(ctx, &workqueuev1.KeyStateRequest{Queue: q.name, Key: key})
	if err != nil {
		return KeyStatus{}, wrap(queueService, q.op("key state in"), err)
	}
	st := KeyStatus{
		State:     KeyState(resp.GetState()),
		Priority:  resp.GetPriority(),
		Failures:  int(resp.GetFailures()),
		LastError: resp.GetLastError(),
		Reasons:   reasonsFromProto(resp.GetReasons()),
		Holder:    resp.GetHolder(),
		Dirty:     resp.GetDirty(),
	}
	if ts := resp.GetQueuedSince(); ts != nil {
		st.QueuedSince = ts.AsTime()
	}
	if ts := resp.GetWaitingUntil(); ts != nil {
		st.WaitingUntil = ts.AsTime()
	}
	if ts := resp.GetHeldUntil(); ts != nil {
		st.HeldUntil = ts.AsTime()
	}
	if ts := resp.GetSettlingUntil(); ts != nil {
		st.SettlingUntil = ts.AsTime()
	}
	if shard := resp.GetShard(); shard != nil {
		st.Shard = &ShardPlace{
			Slot:        int(shard.GetSlot()),
			SlotKnown:   shard.Slot != nil,
			Owner:       shard.GetOwner(),
			GrantedHere: shard.GetGrantedHere(),
		}
	}
	return st, nil
}

// ShutDown stops the queue handing out keys, at once (client-go ShutDown):
// workers holding leases are asked to stop (their reconcile contexts are
// cancelled with [ErrCancelled]) and may still finish them. It affects every
// worker of the queue, not just this process.
func (q *Queue) ShutDown(ctx context.Context) error {
	_, err := q.client.queue.ShutDown(ctx, &workqueuev1.ShutDownRequest{Queue: q.name})
	return wrap(queueService, q.op("shut down"), err)
}

// DrainReport says what became of the leases held when a drain began.
type DrainReport struct {
	Finished int // ended by their workers within the timeout
	Returned int // returned to the queue
}

// ShutDownWithDrain stops the queue handing out keys and waits up to timeout
// (0: the sidecar's grace period) for held leases to end, then returns the
// rest to the queue (client-go ShutDownWithDrain).
func (q *Queue) ShutDownWithDrain(ctx context.Context, timeout time.Duration) (DrainReport, error) {
	req := &workqueuev1.ShutDownRequest{Queue: q.name, Drain: true}
	if timeout > 0 {
		req.DrainTimeout = durationpb.New(timeout)
	}
	resp, err := q.client.queue.ShutDown(ctx, req)
	if err != nil {
		return DrainReport{}, wrap(queueService, q.op("shut down with drain"), err)
	}
	return DrainReport{Finished: int(resp.GetFinished()), Returned: int(resp.GetReturned())}, nil
}
