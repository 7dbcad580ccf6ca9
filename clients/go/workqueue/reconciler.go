package workqueue

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueuev1"
)

// Reconciler makes the world match one key. It is called with the lease's
// context, which is cancelled (see [context.Cause]) with [ErrCancelled] when
// the sidecar asks the worker to stop, or [ErrLeaseLost] when the lease is
// gone, its deadline included. The context's Deadline is the lease's
// deadline (the sidecar's, moved by every extend): past it another worker
// may hold the key, so a reconcile that commits a side effect late should
// check it first. A lease already past its deadline when a reconcile slot
// frees is not reconciled at all. A Reconciler must be safe to call from
// several goroutines at once, never for the same key at the same time.
type Reconciler interface {
	Reconcile(ctx context.Context, req Request) (Result, error)
}

// ReconcilerFunc adapts a function to [Reconciler].
type ReconcilerFunc func(ctx context.Context, req Request) (Result, error)

// Reconcile calls f.
func (f ReconcilerFunc) Reconcile(ctx context.Context, req Request) (Result, error) {
	return f(ctx, req)
}

// Result is what a successful reconcile asks for next. The zero Result means
// done: the key's failures are forgotten. A non-nil error instead of a Result
// means retry with backoff (the error text becomes the key's last error);
// the Result is then ignored.
type Result struct {
	// RequeueAfter, when positive, asks to see the key again after this
	// long (e.g. to poll an external system); the failures are forgotten.
	RequeueAfter time.Duration
}

// Request is one leased key and what the sidecar knows about it.
type Request struct {
	// Key is "namespace/name", or "name" for a cluster-scoped object.
	Key string

	// Namespace and Name are the key split at its first "/" (see
	// [SplitKey]); Namespace is empty for a cluster-scoped object.
	Namespace, Name string

	// Priority is the key's priority when it was handed out.
	Priority int32

	// Failures counts failed attempts since the key was last forgotten.
	Failures int

	// LastError is the error text of the last failed attempt; empty if none.
	LastError string

	// Reasons says why the key was queued, merged over every add since it
	// was last handed out.
	Reasons []Reason

	// EnqueuedAt is when the key became ready for this round.
	EnqueuedAt time.Time

	// Object is the key's object from the queue's primary informer cache,
	// when the worker runs with [WithObject] and the queue has one; nil
	// otherwise.
	Object *Object

	// Deleting: the key's object (from the queue's primary informer) is
	// being deleted: it has a deletionTimestamp and finalizers hold it.
	// Clean up, then let the finalizer go.
	Deleting bool

	// DeletionTimestamp is the object's metadata.deletionTimestamp when
	// Deleting; zero otherwise.
	DeletionTimestamp time.Time

	// lease names the lease this request came with, for writes made under
	// it ([Request.Objects]); nil for a Request built by hand.
	lease *requestLease
}

// requestLease is where a Request came from: the client and queue that
// leased it, and the lease's token.
type requestLease struct {
	client *Client
	queue  string
	token  uint64
}

// Objects writes objects under this request's lease: each write names the
// lease, so the sidecar makes it only while the lease is current
// ([ErrStaleLease] once it has ended: another worker may hold the key;
// [ErrLeaseEndedDuringWrite] when it ended while the write was out: the
// write was made, but the key may be another worker's now) and the key is
// not handed out again until the sidecar's caches have seen the write, so
// the next reconcile reads it back. This is the way to write from a
// reconcile.
func (r Request) Objects() *Objects {
	if r.lease == nil {
		return &Objects{}
	}
	return &Objects{client: r.lease.client, lease: r.leaseRef()}
}

func (r Request) leaseRef() *workqueuev1.LeaseRef {
	if r.lease == nil {
		return nil
	}
	return &workqueuev1.LeaseRef{Queue: r.lease.queue, Key: r.Key, Token: r.lease.token}
}

// Has reports whether the key was queued for the given reason.
func (r Request) Has(kind ReasonKind) bool {
	return hasReason(r.Reasons, kind)
}

func hasReason(reasons []Reason, kind ReasonKind) bool {
	for _, reason := range reasons {
		if reason.Kind == kind {
			return true
		}
	}
	return false
}

// SplitKey splits a key into namespace and name; a key without "/" (a
// cluster-scoped object) has an empty namespace.
func SplitKey(key string) (namespace, name string) {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

// Reason is one cause of a key being queued.
type Reason struct {
	Kind ReasonKind
	// Source names who or what caused it: an informer, or the reason text
	// given to an add; often empty.
	Source string
	// Detail is free text for people; often empty.
	Detail string
}

// ReasonKind says why a key was queued.
type ReasonKind int32

// The reasons a key is queued (the proto's ReasonKind).
const (
	ReasonManual           ReasonKind = ReasonKind(workqueuev1.ReasonKind_REASON_KIND_MANUAL)
	ReasonInitialList      ReasonKind = ReasonKind(workqueuev1.ReasonKind_REASON_KIND_INITIAL_LIST)
	ReasonResync           ReasonKind = ReasonKind(workqueuev1.ReasonKind_REASON_KIND_RESYNC)
	ReasonAdded            ReasonKind = ReasonKind(workqueuev1.ReasonKind_REASON_KIND_ADDED)
	ReasonUpdated          ReasonKind = ReasonKind(workqueuev1.ReasonKind_REASON_KIND_UPDATED)
	ReasonDeleted          ReasonKind = ReasonKind(workqueuev1.ReasonKind_REASON_KIND_DELETED)
	ReasonRetry            ReasonKind = ReasonKind(workqueuev1.ReasonKind_REASON_KIND_RETRY)
	ReasonRequeueAfter     ReasonKind = ReasonKind(workqueuev1.ReasonKind_REASON_KIND_REQUEUE_AFTER)
	ReasonLeaseExpired     ReasonKind = ReasonKind(workqueuev1.ReasonKind_REASON_KIND_LEASE_EXPIRED)
	ReasonLeaseReleased    ReasonKind = ReasonKind(workqueuev1.ReasonKind_REASON_KIND_LEASE_RELEASED)
	ReasonTrigger          ReasonKind = ReasonKind(workqueuev1.ReasonKind_REASON_KIND_TRIGGER)
	ReasonShutdownReturned ReasonKind = ReasonKind(workqueuev1.ReasonKind_REASON_KIND_SHUTDOWN_RETURNED)
)

// String is the kind in lower case without its prefix, e.g. "lease_expired".
func (k ReasonKind) String() string {
	return strings.ToLower(strings.TrimPrefix(workqueuev1.ReasonKind(k).String(), "REASON_KIND_"))
}

// Object is one object as the sidecar's informer cache holds it.
type Object struct {
	Namespace string // empty for a cluster-scoped object
	Name      string
	// ResourceVersion is metadata.resourceVersion, to compare with versions
	// the worker wrote without parsing JSON.
	ResourceVersion string
	// Deleted marks the last known state of a deleted object (a tombstone).
	Deleted bool
	// JSON is the object as the API server sent it (managedFields stripped
	// unless the informer keeps them).
	JSON json.RawMessage
}

// Decode unmarshals the object's JSON into v: a pointer to a Go type of the
// resource, or to a map[string]any for an unstructured view.
func (o *Object) Decode(v any) error {
	return json.Unmarshal(o.JSON, v)
}

func objectFromProto(o *workqueuev1.CachedObject) *Object {
	if o == nil {
		return nil
	}
	return &Object{
		Namespace:       o.GetNamespace(),
		Name:            o.GetName(),
		ResourceVersion: o.GetResourceVersion(),
		Deleted:         o.GetDeleted(),
		JSON:            json.RawMessage(o.GetJson()),
	}
}

func reasonsFromProto(in []*workqueuev1.Reason) []Reason {
	out := make([]Reason, 0, len(in))
	for _, r := range in {
		out = append(out, Reason{Kind: ReasonKind(r.GetKind()), Source: r.GetSource(), Detail: r.GetDetail()})
	}
	return out
}

func requestFromLease(q *Queue, l *workqueuev1.Lease) Request {
	namespace, name := SplitKey(l.GetKey())
	req := Request{
		Key:       l.GetKey(),
		Namespace: namespace,
		Name:      name,
		Deleting:  l.GetDeleting(),
		lease:     &requestLease{client: q.client, queue: q.name, token: l.GetToken()},
		Priority:  l.GetPriority(),
		Failures:  int(l.GetFailures()),
		LastError: l.GetLastError(),
		Reasons:   reasonsFromProto(l.GetReasons()),
		Object:    objectFromProto(l.GetObject()),
	}
	if l.GetEnqueuedAt() != nil {
		req.EnqueuedAt = l.GetEnqueuedAt().AsTime()
	}
	if l.GetDeletionTimestamp() != nil {
		req.DeletionTimestamp = l.GetDeletionTimestamp().AsTime()
	}
	return req
}
