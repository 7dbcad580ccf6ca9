package workqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
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
	// (FAILED_PRECONDITION). A write made under such a lease was not made.
	ErrStaleLease = errors.New("stale lease")

	// ErrNoKubernetes: a write asked of a sidecar that runs without
	// Kubernetes (its config names no informers), which cannot write
	// objects (FAILED_PRECONDITION from the object service).
	ErrNoKubernetes = errors.New("sidecar runs without Kubernetes")

	// ErrUnknownKind: the API server does not serve the write's apiVersion
	// and kind; is its CRD installed? (NOT_FOUND from the object service
	// without the API server's details.)
	ErrUnknownKind = errors.New("unknown kind")

	// ErrConflict: the API server refused a write as conflicting (ABORTED,
	// HTTP 409): a stale resourceVersion, a failed UID or resourceVersion
	// precondition, fields another manager owns, an object that already
	// exists ([ErrAlreadyExists] matches too). Read again and retry.
	// [ErrLeaseEndedDuringWrite] matches it too, but is no conflict to retry.
	ErrConflict = errors.New("conflict")

	// ErrAlreadyExists: a create found an object of that name (ABORTED,
	// reason AlreadyExists); it also matches [ErrConflict].
	ErrAlreadyExists = errors.New("already exists")

	// ErrLeaseEndedDuringWrite: a write under a lease was made, but the
	// lease ended before the API server answered it (the sidecar's term as
	// leader or shard owner ended, a shutdown handed the lease back, or the
	// worker's own Done or Finish ended it), so another worker may hold the
	// key by now (ABORTED, sidecar reason LEASE_ENDED_DURING_WRITE). It also
	// matches [ErrConflict], but do not read again and retry: treat it like a
	// lost lease, and do not Done or Finish the lease expecting success.
	// [Queue.Run] does so when a reconcile returns it (wrapped too): the
	// lease is finished as lost and logged once as a lost lease.
	ErrLeaseEndedDuringWrite = errors.New("lease ended during the write")

	// ErrForbidden: the sidecar's credentials may not make this write
	// (PERMISSION_DENIED, HTTP 403): grant its service account the verb.
	ErrForbidden = errors.New("forbidden")

	// ErrUnavailable: the queue is shutting down, this sidecar is not the
	// leader, an informer has not synced yet, or the sidecar cannot be
	// reached; for a write, the API server is unreachable or answered 429,
	// 500 or 503, or too many writes to it are still unanswered (sidecar
	// reason TOO_MANY_WRITES_OUT: nothing was sent) (UNAVAILABLE). Worth
	// retrying later.
	ErrUnavailable = errors.New("sidecar unavailable")

	// ErrInvalidArgument: an empty or oversized key, a negative delay, a
	// malformed selector; a write's malformed object or patch, or one the API
	// server found invalid (INVALID_ARGUMENT; HTTP 400 and 422, whose causes
	// are in [APIError.Causes]); a message past the size limit (OUT_OF_RANGE).
	ErrInvalidArgument = errors.New("invalid argument")

	// ErrOverLimit: a batch over the server's limit, or a queue full at its
	// max_keys (RESOURCE_EXHAUSTED).
	ErrOverLimit = errors.New("over a sidecar limit")

	// ErrNotFound: the object does not exist: a cache read found it not in
	// the informer's cache (the cache answers that with an empty response),
	// or the API server answered a write with 404 (NOT_FOUND).
	ErrNotFound = errors.New("object not found")

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

// APIError is the API server's own account of a refused write, from the
// details of the sidecar's status. Get it with [errors.As]:
//
//	var apiErr *workqueue.APIError
//	if errors.As(err, &apiErr) {
//		for _, c := range apiErr.Causes { ... c.Field, c.Message ... }
//	}
type APIError struct {
	// Reason is the API server's reason: "Conflict", "AlreadyExists",
	// "Invalid", "NotFound", "Forbidden", ...
	Reason string
	// HTTPStatus is the API server's HTTP status code, e.g. 409 or 422.
	HTTPStatus int
	// Causes are the fields an Invalid (422) object was refused for, one
	// each; empty otherwise.
	Causes []Cause
}

// Cause is one field the API server refused, and why.
type Cause struct {
	Field   string // e.g. "metadata.name"
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("API server: %s (HTTP %d)", e.Reason, e.HTTPStatus)
}

// kubernetesErrorDomain is the ErrorInfo domain of the API server's
// refusals, as the sidecar sends them.
const kubernetesErrorDomain = "k8s.io"

// sidecarErrorDomain is the ErrorInfo domain of the sidecar's own
// refusals that share a code with others (STALE_LEASE, NO_KUBERNETES,
// LEASE_ENDED_DURING_WRITE).
const sidecarErrorDomain = "workqueue-sidecar"

// sidecarReason is the reason of the status's ErrorInfo from the sidecar
// itself, or "".
func sidecarReason(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == sidecarErrorDomain {
			return info.GetReason()
		}
	}
	return ""
}

func apiErrorFrom(st *status.Status) *APIError {
	var out *APIError
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() != kubernetesErrorDomain {
				continue
			}
			if out == nil {
				out = &APIError{}
			}
			out.Reason = d.GetReason()
			out.HTTPStatus, _ = strconv.Atoi(d.GetMetadata()["http_status"])
		case *errdetails.BadRequest:
			if out == nil {
				out = &APIError{}
			}
			for _, v := range d.GetFieldViolations() {
				out.Causes = append(out.Causes, Cause{Field: v.GetField(), Message: v.GetDescription()})
			}
		}
	}
	return out
}

// rpcError is a failed call: the operation, the sentinels for its code and
// the gRPC status, and for a write the API server's details.
type rpcError struct {
	op        string
	sentinels []error
	status    *status.Status
	api       *APIError
}

func (e *rpcError) Error() string {
	msg := e.status.Message()
	if msg == "" {
		msg = e.status.Code().String()
	}
	if len(e.sentinels) == 0 {
		return fmt.Sprintf("workqueue: %s: %s: %s", e.op, e.status.Code(), msg)
	}
	return fmt.Sprintf("workqueue: %s: %v: %s", e.op, e.sentinels[0], msg)
}

// Unwrap exposes the sentinels and the API server's details, so
// errors.Is(err, ErrStaleLease) and errors.As(err, &apiErr) work.
func (e *rpcError) Unwrap() []error {
	out := append([]error(nil), e.sentinels...)
	if e.api != nil {
		out = append(out, e.api)
	}
	return out
}

// GRPCStatus lets [status.FromError] and [status.Code] see the status.
func (e *rpcError) GRPCStatus() *status.Status { return e.status }

// service tells which service answered, since NOT_FOUND means an unknown
// queue from one and an unknown informer from the other.
type service int

const (
	queueService service = iota
	cacheService
	objectService
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
	e := &rpcError{op: op, status: st}
	if svc == objectService {
		e.api = apiErrorFrom(st)
	}
	e.sentinels = sentinelsFor(svc, st, e.api)
	return e
}

func sentinelsFor(svc service, st *status.Status, api *APIError) []error {
	if svc == objectService {
		switch st.Code() {
		case codes.NotFound:
			if api == nil {
				return []error{ErrUnknownKind}
			}
			return []error{ErrNotFound}
		case codes.FailedPrecondition:
			// The same code answers a write asked of a sidecar without
			// Kubernetes and a write under a lease that ended; the
			// sidecar's ErrorInfo reason tells them apart.
			if sidecarReason(st) == "NO_KUBERNETES" {
				return []error{ErrNoKubernetes}
			}
			return []error{ErrStaleLease}
		case codes.Aborted:
			// The API server's conflicts (409) and a write whose lease
			// ended before its answer share the code; the sidecar's
			// ErrorInfo reason tells the latter.
			if sidecarReason(st) == "LEASE_ENDED_DURING_WRITE" {
				return []error{ErrLeaseEndedDuringWrite, ErrConflict}
			}
			if api != nil && api.Reason == "AlreadyExists" {
				return []error{ErrAlreadyExists, ErrConflict}
			}
			return []error{ErrConflict}
		}
	}
	if sentinel := sentinelFor(svc, st.Code()); sentinel != nil {
		return []error{sentinel}
	}
	return nil
}

func sentinelFor(svc service, code codes.Code) error {
	switch code {
	case codes.NotFound:
		if svc == cacheService {
			return ErrUnknownInformer
		}
		return ErrUnknownQueue
	case codes.Aborted:
		return ErrConflict
	case codes.PermissionDenied:
		return ErrForbidden
	case codes.FailedPrecondition:
		return ErrStaleLease
	case codes.Unavailable:
		return ErrUnavailable
	case codes.InvalidArgument, codes.OutOfRange:
		// OUT_OF_RANGE: a message past the sidecar's size limit (a write
		// body over 3 MiB); as a bad field, sending it again cannot help.
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
