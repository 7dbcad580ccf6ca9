package workqueue

import (
	"context"
	"errors"
	"testing"
	"time"
)

// conformance: C6
// A reconcile's ctx.Err() reads the clock against its lease's deadline: a
// lease that ended while no timer had fired yet (the process was stopped
// and resumed) is seen as over at once, and an extend makes it hold again.
func TestLeaseContextErrReadsTheClockWhenAsked(t *testing.T) {
	s := newSession(&worker{}, nil, func() {}, context.Background())
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	h := &held{s: s, key: "ns/a", token: 1, cancel: cancel}
	h.ctx = leaseContext{Context: ctx, h: h}
	var reconcileCtx context.Context = h.ctx

	h.setDeadline(time.Now(), nil, time.Minute)
	if err := reconcileCtx.Err(); err != nil {
		t.Fatalf("a lease a minute from its end: Err() = %v", err)
	}
	// The deadline passed, and nothing cancelled the context yet.
	h.setDeadline(time.Now().Add(-time.Second), nil, 0)
	if err := reconcileCtx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a lease past its deadline, uncancelled: Err() = %v, want DeadlineExceeded", err)
	}
	h.setDeadline(time.Now(), nil, time.Minute)
	if err := reconcileCtx.Err(); err != nil {
		t.Fatalf("extended: Err() = %v", err)
	}
	cancel(ErrLeaseLost)
	if err := reconcileCtx.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: Err() = %v", err)
	}
}
