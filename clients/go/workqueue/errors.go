package workqueue

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors for the sidecar's status codes. Every error returned by
// this package's calls to the sidecar matches one of them with [errors.Is]
// when the code has a meaning here, and also carries the gRPC status
// ([status.Code] and [status.FromError] work on it).
var (
	// ErrUnknownQueue: the sidecar has no queue of that name (NOT_FOUND).
	ErrUnknownQueue = errors.New("unknown queue")

	// ErrUnknownInformer: the sidecar has no informer (or index) of that
	// name; a sidecar without informers answers this for every name
	// (NOT_FOUND from the cache service).
	ErrUnknownInformer = errors.New("unknown informer")

	// ErrStaleLease: the lease's token is no longer current (the lease
	// ended, expired or was handed to someone else); nothing changed
	// (FAILED_PRECONDITION).
	ErrStaleLease = errors.New("stale lease")

	// ErrUnavailable: the queue is shutting down, this sidecar is not the
	// leader, an informer has not synced yet, or the sidecar cannot be
	// reached (UNAVAILABLE). Worth retrying later.
	ErrUnavailable = errors.New("sidecar unavailable")

	// ErrInvalidArgument: an empty or oversized key, a negative delay, a
	// malformed selector (INVALID_ARGUMENT).
	ErrInvalidArgument = errors.New("invalid argument")

	// ErrOverLimit: a batch over the server's limit, or a queue full at its
	// max_keys (RESOURCE_EXHAUSTED).
	ErrOverLimit = errors.New("over a sidecar limit")

	// ErrNotFound: the object is not in the informer's cache. Not a gRPC
	// code: the cache answers such a read with an empty response.
	ErrNotFound = errors.New("object not found in the cache")

	// ErrNoKey: [Queue.Get] found no ready key within its wait.
	ErrNoKey = errors.New("no key became ready")
)

// Causes of a reconcile's context being cancelled, read with
// [context.Cause].
var (
	// ErrLeaseLost: the lease ended without the worker: the Work stream
	// broke, the lease expired, the sidecar revoked it, or the worker
	// stopped before the reconcile returned. The key is back in the queue;
	// the reconcile's result is discarded.
	ErrLeaseLost = errors.New("lease lost")

	// ErrCancelled: the sidecar asked the worker to stop working on the key
	// (the queue is shutting down, or the sidecar lost leadership). The
	// lease is still valid: return soon and the result is applied.
	ErrCancelled = errors.New("sidecar asked to stop")
)

// rpcError is a failed call: the operation, the sentinel for its code and
// the gRPC status.
type rpcError struct {
	op       string
	sentinel error
	status   *status.Status
}

func (e *rpcError) Error() string {
	msg := e.status.Message()
	if msg == "" {
		msg = e.status.Code().String()
	}
	if e.sentinel == nil {
		return fmt.Sprintf("workqueue: %s: %s: %s", e.op, e.status.Code(), msg)
	}
	return fmt.Sprintf("workqueue: %s: %v: %s", e.op, e.sentinel, msg)
}

// Unwrap exposes the sentinel, so errors.Is(err, ErrStaleLease) works.
func (e *rpcError) Unwrap() error { return e.sentinel }

// GRPCStatus lets [status.FromError] and [status.Code] see the status.
func (e *rpcError) GRPCStatus() *status.Status { return e.status }

// service tells which service answered, since NOT_FOUND means an unknown
// queue from one and an unknown informer from the other.
type service int

const (
	queueService service = iota
	cacheService
)

// wrap turns an error from a generated stub into an *rpcError naming op.
// Context errors of the caller's own ctx pass through unchanged.
func wrap(svc service, op string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("workqueue: %s: %w", op, err)
	}
	return &rpcError{op: op, sentinel: sentinelFor(svc, st.Code()), status: st}
}

func sentinelFor(svc service, code codes.Code) error {
	switch code {
	case codes.NotFound:
		if svc == cacheService {
			return ErrUnknownInformer
		}
		return ErrUnknownQueue
	case codes.FailedPrecondition:
		return ErrStaleLease
	case codes.Unavailable:
		return ErrUnavailable
	case codes.InvalidArgument:
		return ErrInvalidArgument
	case codes.ResourceExhausted:
		return ErrOverLimit
	case codes.Unimplemented:
		return errors.ErrUnsupported
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	case codes.Canceled:
		return context.Canceled
	default:
		return nil
	}
}

// codeError is an error reported inside a Work stream answer (FinishAck,
// Extended) rather than as the status of a call.
func codeError(op string, code int32, message string) error {
	return wrap(queueService, op, status.Error(codes.Code(code), message))
}
