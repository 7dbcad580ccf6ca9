package workqueue

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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
