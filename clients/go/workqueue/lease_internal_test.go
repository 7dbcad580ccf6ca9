package workqueue

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueuev1"
)

func TestRequestsReadDeletingAndTheirLease(t *testing.T) {
	q := &Queue{client: &Client{}, name: "users"}
	at := time.Date(2026, 11, 24, 16, 0, 0, 0, time.UTC)
	req := requestFromLease(q, &workqueuev1.Lease{Key: "team/alice", Token: 7, Deleting: true, DeletionTimestamp: timestamppb.New(at)})
	if req.Namespace != "team" || req.Name != "alice" || !req.Deleting || !req.DeletionTimestamp.Equal(at) {
		t.Errorf("request = %+v", req)
	}
	if ref := req.Objects().lease; ref.GetQueue() != "users" || ref.GetKey() != "team/alice" || ref.GetToken() != 7 {
		t.Errorf("Objects() writes under %v; want users team/alice 7", ref)
	}
	if KeySettling.String() != "settling" {
		t.Errorf("KeySettling prints as %q", KeySettling.String())
	}
}
