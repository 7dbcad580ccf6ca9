package workqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueuev1"
)

// A lease the sidecar asks back (a Cancel with revoked false, or an Extend
// answered with cancel) stays valid: its reconcile is cancelled with
// ErrCancelled and the ask is logged at debug, one line per key, never at
// info: a sidecar that stops, or whose shard slots move to another replica
// (up to 4,096 at once), asks back every such lease. A revoked lease is
// still a lost one, logged as a warning.
func TestAskedBackLeasesAreCancelledAndLoggedAtDebug(t *testing.T) {
	var logs bytes.Buffer
	w := &worker{log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	s := newSession(w, nil, func() {}, context.Background())
	hold := func(token uint64) *held {
		ctx, cancel := context.WithCancelCause(context.Background())
		h := &held{s: s, key: fmt.Sprintf("ns/k%d", token), token: token, cancel: cancel}
		h.ctx = leaseContext{Context: ctx, h: h}
		h.setDeadline(time.Now(), nil, time.Minute)
		s.leases[token] = h
		return h
	}
	const moved = 64
	var asked []*held
	for token := uint64(1); token <= moved; token++ {
		h := hold(token)
		asked = append(asked, h)
		s.onCancel(&workqueuev1.WorkResponse_Cancel{Key: h.key, Token: h.token, Message: "shard slot moved"})
	}
	extended := hold(moved + 1)
	asked = append(asked, extended)
	s.onExtended(&workqueuev1.WorkResponse_Extended{Key: extended.key, Token: extended.token, Ttl: durationpb.New(time.Minute), Cancel: true})

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != len(asked) {
		t.Errorf("%d leases asked back logged %d lines; want one each:\n%s", len(asked), len(lines), logs.String())
	}
	for i, h := range asked {
		if cause := context.Cause(h.ctx); !errors.Is(cause, ErrCancelled) {
			t.Errorf("%s: cause %v; want ErrCancelled", h.key, cause)
		}
		if i < len(lines) && (!strings.Contains(lines[i], "level=DEBUG") || !strings.Contains(lines[i], "key="+h.key)) {
			t.Errorf("%s asked back logged %q; want DEBUG naming the key", h.key, lines[i])
		}
	}

	logs.Reset()
	revoked := hold(moved + 2)
	s.onCancel(&workqueuev1.WorkResponse_Cancel{Key: revoked.key, Token: revoked.token, Revoked: true, Message: "leadership lost"})
	if line := logs.String(); !strings.Contains(line, "level=WARN") || !strings.Contains(line, "lease lost") {
		t.Errorf("a revoked lease logged %q; want a WARN that it was lost", line)
	}
	if cause := context.Cause(revoked.ctx); !errors.Is(cause, ErrLeaseLost) {
		t.Errorf("revoked: cause %v; want ErrLeaseLost", cause)
	}
}
