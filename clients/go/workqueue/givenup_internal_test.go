package workqueue

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueuev1"
)

// A given-up lease's Finish the sidecar applied is not answered (it answers
// only failures): its entry goes once an Extend sent after it is answered,
// never before, whatever the time.
func TestGivenUpFinishesAreForgottenOnceALaterExtendIsAnswered(t *testing.T) {
	var g givenUpFinishes
	g.add(1, 2) // sent after two Extends
	g.extendAnswered()
	g.extendAnswered()
	if _, ok := g.extendsBefore[1]; !ok {
		t.Fatal("forgotten when the Extends sent before it were answered: its refusal may still come")
	}
	g.extendAnswered()
	if _, ok := g.extendsBefore[1]; ok {
		t.Fatal("still awaited after an Extend sent after it was answered")
	}
}

// The refusal of a given-up lease's Finish is expected: debug. Any other
// refusal is a warning.
func TestOnlyUnexpectedFinishRefusalsAreWarnings(t *testing.T) {
	var logs bytes.Buffer
	s := &session{w: &worker{log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}}
	s.givenUp.add(1, 0)
	refuse := func(token uint64) string {
		logs.Reset()
		s.onFinishAck(&workqueuev1.WorkResponse_FinishAck{Key: "k", Token: token, Code: int32(codes.FailedPrecondition), Message: "stale"})
		return logs.String()
	}
	if line := refuse(1); !strings.Contains(line, "level=DEBUG") {
		t.Errorf("the refusal of a given-up lease's Finish logged %q; want DEBUG", line)
	}
	if line := refuse(2); !strings.Contains(line, "level=WARN") {
		t.Errorf("an unexpected refusal logged %q; want WARN", line)
	}
	if line := refuse(1); !strings.Contains(line, "level=WARN") {
		t.Errorf("a second refusal of one given-up lease's Finish logged %q; want WARN (each lease has one Finish)", line)
	}
}
