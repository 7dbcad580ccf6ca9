package workqueue

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueuev1"
)

// recordingStream is a Work stream that keeps what the session sends.
type recordingStream struct {
	grpc.BidiStreamingClient[workqueuev1.WorkRequest, workqueuev1.WorkResponse]
	sent []*workqueuev1.WorkRequest
}

func (r *recordingStream) Send(req *workqueuev1.WorkRequest) error {
	r.sent = append(r.sent, req)
	return nil
}

// A reconcile that returns ErrLeaseEndedDuringWrite (here wrapped, as a
// reconciler would) wrote under a lease the sidecar had ended: the lease is
// lost. Its outcome is not sent as a Finish (the sidecar would refuse it as
// stale, a warning), but a lost lease's Finish is, whose refusal is
// expected; the loss is logged once, a warning saying why, and the error is
// not logged as a failed reconcile.
func TestALeaseEndedDuringAWriteIsFinishedAsLost(t *testing.T) {
	var logs bytes.Buffer
	w := &worker{log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("queue", "q")}
	stream := &recordingStream{}
	s := newSession(w, stream, func() {}, context.Background())
	ctx, cancel := context.WithCancelCause(context.Background())
	h := &held{s: s, key: "ns/a", token: 7, cancel: cancel}
	h.ctx = leaseContext{Context: ctx, h: h}
	h.setDeadline(time.Now(), nil, time.Minute)
	s.leases[h.token] = h

	ended := wrap(objectService, "apply ConfigMap ns/a-child", sidecarRefusal(t, codes.Aborted, "LEASE_ENDED_DURING_WRITE",
		`the write was made, but the lease on "ns/a" of queue "q" ended before the API server answered it`))
	s.forget(h)
	s.finish(h, outcome{err: fmt.Errorf("reconcile ns/a: %w", ended)})

	if len(stream.sent) != 1 {
		t.Fatalf("sent %d messages; want one Finish", len(stream.sent))
	}
	finish := stream.sent[0].GetFinish()
	if finish.GetToken() != 7 || finish.GetRetry().GetError() != "lease lost before the worker finished" {
		t.Errorf("sent %v; want the Finish of a lost lease", stream.sent[0])
	}
	if !h.lost.Load() {
		t.Error("the lease is not marked lost")
	}
	var loud []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !strings.Contains(line, "level=DEBUG") {
			loud = append(loud, line)
		}
	}
	if len(loud) != 1 || !strings.Contains(loud[0], "level=WARN") || !strings.Contains(loud[0], "lease lost") ||
		!strings.Contains(loud[0], `why="lease ended during write"`) || !strings.Contains(loud[0], "key=ns/a") ||
		!strings.Contains(loud[0], "queue=q") {
		t.Errorf("logged at INFO or above:\n%s\nwant one WARN that the lease of ns/a in queue q was lost, why=\"lease ended during write\"", strings.Join(loud, "\n"))
	}

	// The sidecar refuses that Finish (the lease had ended): expected.
	logs.Reset()
	s.onFinishAck(&workqueuev1.WorkResponse_FinishAck{Key: "ns/a", Token: 7, Code: int32(codes.FailedPrecondition), Message: "stale lease token 7"})
	if line := logs.String(); strings.Contains(line, "level=WARN") {
		t.Errorf("the refusal of the Finish logged %q; want below WARN", line)
	}
}
