package workqueue

import (
	"testing"
	"time"
)

// A lost lease's Finish that the sidecar applied (it still held the lease)
// is not answered on a stream that hears only of failures: its entry is
// dropped a TTL after it was sent, never before.
func TestUnansweredLostFinishesAreDroppedAfterATTL(t *testing.T) {
	s := &session{extendEvery: 10 * time.Second} // a 30 s TTL
	now := time.Now().UnixNano()
	s.lostFinishes.Store(uint64(1), now-int64(31*time.Second))
	s.lostFinishes.Store(uint64(2), now-int64(29*time.Second))
	s.dropUnansweredLostFinishes(now)
	if _, ok := s.lostFinishes.Load(uint64(1)); ok {
		t.Error("a Finish sent 31 s ago (TTL 30 s) is still awaited")
	}
	if _, ok := s.lostFinishes.Load(uint64(2)); !ok {
		t.Error("a Finish sent 29 s ago (TTL 30 s) was dropped before its refusal could come")
	}
}
