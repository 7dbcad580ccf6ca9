package workqueue

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// refusal is a status as the sidecar sends an API server's refusal.
func refusal(t *testing.T, code codes.Code, reason, httpStatus string, causes ...*errdetails.BadRequest_FieldViolation) error {
	t.Helper()
	st, err := status.New(code, reason+" says the API server").WithDetails(
		&errdetails.ErrorInfo{Reason: reason, Domain: "k8s.io", Metadata: map[string]string{"http_status": httpStatus}},
		&errdetails.BadRequest{FieldViolations: causes},
	)
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// sidecarRefusal is a status as the sidecar sends its own refusals that
// share a code with others: an ErrorInfo of domain "workqueue-sidecar".
func sidecarRefusal(t *testing.T, code codes.Code, reason, message string) error {
	t.Helper()
	st, err := status.New(code, message).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "workqueue-sidecar"})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestObjectServiceErrorsMatchTheirSentinels(t *testing.T) {
	cases := []struct {
		name string
		err  error
		is   []error
		not  []error
	}{
		{"conflict", refusal(t, codes.Aborted, "Conflict", "409"), []error{ErrConflict}, []error{ErrAlreadyExists, ErrLeaseEndedDuringWrite}},
		{"bare aborted", status.Error(codes.Aborted, "the object has been modified"), []error{ErrConflict}, []error{ErrAlreadyExists, ErrLeaseEndedDuringWrite}},
		{"already exists", refusal(t, codes.Aborted, "AlreadyExists", "409"), []error{ErrConflict, ErrAlreadyExists}, nil},
		{"not found", refusal(t, codes.NotFound, "NotFound", "404"), []error{ErrNotFound}, []error{ErrUnknownKind, ErrUnknownQueue}},
		{"unknown kind", status.Error(codes.NotFound, "no kind Foo in example.com/v1: is its CRD installed?"), []error{ErrUnknownKind}, []error{ErrNotFound}},
		{"forbidden", refusal(t, codes.PermissionDenied, "Forbidden", "403"), []error{ErrForbidden}, nil},
		{"invalid", refusal(t, codes.InvalidArgument, "Invalid", "422"), []error{ErrInvalidArgument}, nil},
		{"stale lease", sidecarRefusal(t, codes.FailedPrecondition, "STALE_LEASE", "stale lease token 7"), []error{ErrStaleLease}, []error{ErrNoKubernetes}},
		// Told apart by the reason, not the words.
		{"no kubernetes", sidecarRefusal(t, codes.FailedPrecondition, "NO_KUBERNETES", "no writes here"), []error{ErrNoKubernetes}, []error{ErrStaleLease}},
		// The write was made, but its lease ended before the API server's
		// answer: a conflict too, told apart by the sidecar's reason.
		{"lease ended during write", sidecarRefusal(t, codes.Aborted, "LEASE_ENDED_DURING_WRITE",
			`the write was made, but the lease on "default/a" of queue "q" ended before the API server answered it`),
			[]error{ErrLeaseEndedDuringWrite, ErrConflict}, []error{ErrAlreadyExists, ErrStaleLease}},
		{"unavailable", refusal(t, codes.Unavailable, "ServiceUnavailable", "503"), []error{ErrUnavailable}, nil},
		{"too many writes out", sidecarRefusal(t, codes.Unavailable, "TOO_MANY_WRITES_OUT", "256 writes to the API server are still unanswered"),
			[]error{ErrUnavailable}, []error{ErrConflict, ErrStaleLease}},
	}
	for _, c := range cases {
		err := wrap(objectService, "apply ConfigMap default/a", c.err)
		for _, want := range c.is {
			if !errors.Is(err, want) {
				t.Errorf("%s: %v is not %v", c.name, err, want)
			}
		}
		for _, unwanted := range c.not {
			if errors.Is(err, unwanted) {
				t.Errorf("%s: %v is %v", c.name, err, unwanted)
			}
		}
		if status.Code(err) != status.Code(c.err) {
			t.Errorf("%s: code %s; want %s", c.name, status.Code(err), status.Code(c.err))
		}
	}
}

func TestInvalidWritesCarryTheAPIServersCauses(t *testing.T) {
	err := wrap(objectService, "apply", refusal(t, codes.InvalidArgument, "Invalid", "422",
		&errdetails.BadRequest_FieldViolation{Field: "metadata.name", Description: "a lowercase RFC 1123 subdomain must consist of ..."},
		&errdetails.BadRequest_FieldViolation{Field: "data", Description: "Too long"},
	))
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("%v carries no APIError", err)
	}
	if apiErr.Reason != "Invalid" || apiErr.HTTPStatus != 422 || len(apiErr.Causes) != 2 ||
		apiErr.Causes[0].Field != "metadata.name" || apiErr.Causes[1] != (Cause{Field: "data", Message: "Too long"}) {
		t.Errorf("APIError = %+v", apiErr)
	}
	if errors.As(wrap(queueService, "add", status.Error(codes.InvalidArgument, "empty key")), &apiErr) {
		t.Error("a queue error carries an APIError")
	}
}

func TestEachStatusCodeMapsToItsSentinel(t *testing.T) {
	cases := []struct {
		svc  service
		code codes.Code
		want error
	}{
		{queueService, codes.NotFound, ErrUnknownQueue},
		{cacheService, codes.NotFound, ErrUnknownInformer},
		{queueService, codes.FailedPrecondition, ErrStaleLease},
		{queueService, codes.Unavailable, ErrUnavailable},
		{cacheService, codes.Unavailable, ErrUnavailable},
		{queueService, codes.InvalidArgument, ErrInvalidArgument},
		{queueService, codes.ResourceExhausted, ErrOverLimit},
		{cacheService, codes.Unimplemented, errors.ErrUnsupported},
		{cacheService, codes.DeadlineExceeded, context.DeadlineExceeded},
		{objectService, codes.Aborted, ErrConflict},
		{objectService, codes.PermissionDenied, ErrForbidden},
		{objectService, codes.Unavailable, ErrUnavailable},
	}
	for _, c := range cases {
		err := wrap(c.svc, "op", status.Error(c.code, "why"))
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v does not match %v", c.code, err, c.want)
		}
		if got := status.Code(err); got != c.code {
			t.Errorf("%s: status.Code = %s", c.code, got)
		}
	}
	if err := wrap(queueService, "op", status.Error(codes.Internal, "")); err.Error() != "workqueue: op: Internal: Internal" {
		t.Errorf("unmapped code: %q", err)
	}
}

func TestSplitKey(t *testing.T) {
	for key, want := range map[string][2]string{"ns/name": {"ns", "name"}, "name": {"", "name"}} {
		if ns, name := SplitKey(key); ns != want[0] || name != want[1] {
			t.Errorf("SplitKey(%q) = %q, %q", key, ns, name)
		}
	}
}
