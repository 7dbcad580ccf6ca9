package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"workqueue-sidecar/bench/remote-go/internal/stamps"
)

// recorder holds the instants of each object: when its Create was sent and
// when the call returned (the creator, on this process's monotonic clock),
// and, read from the reconciler's stamps file, when the reconciling side
// queued its first event (controller-runtime's event handler, or the
// sidecar's enqueued_at stamp on the lease) and when it was first
// reconciled (the machine's wall clock, which base also reads). Instants are
// nanoseconds since base, plus one so that 0 means "not yet".
type recorder struct {
	base      time.Time
	probe     string
	firstSent atomic.Int64
	sent      []atomic.Int64
	created   []atomic.Int64
	queued    []atomic.Int64
	seen      []atomic.Int64
	remaining atomic.Int64
	// allSeen closes when every object has been reconciled at least once.
	allSeen chan struct{}
	// probeSeen closes when the probe object has been reconciled.
	probeSeen chan struct{}
	probeOnce sync.Once
	// reconciles counts every reconcile of a measured object, repeats
	// included (an Update would cause one; a no-op reconciler writes none).
	reconciles atomic.Int64
	// others counts reconciles of objects that are neither measured nor the
	// probe; nonzero means something else lives in the namespace.
	others atomic.Int64
}

func newRecorder(objects int, probe string) *recorder {
	r := &recorder{
		base:      time.Now(),
		probe:     probe,
		sent:      make([]atomic.Int64, objects),
		created:   make([]atomic.Int64, objects),
		queued:    make([]atomic.Int64, objects),
		seen:      make([]atomic.Int64, objects),
		allSeen:   make(chan struct{}),
		probeSeen: make(chan struct{}),
	}
	r.remaining.Store(int64(objects))
	if objects == 0 {
		close(r.allSeen)
	}
	return r
}

func (r *recorder) now() int64 { return int64(time.Since(r.base)) + 1 }

// startCreating marks the instant just before the first Create is sent.
func (r *recorder) startCreating() { r.firstSent.Store(r.now()) }

// createSent records the instant just before object i's Create is sent.
func (r *recorder) createSent(i int) { r.sent[i].Store(r.now()) }

// createReturned records that object i's Create call returned.
func (r *recorder) createReturned(i int) { r.created[i].Store(r.now()) }

// queuedAt records when the reconciling side queued the first event of the
// object called name; later events of the same object are ignored.
func (r *recorder) queuedAt(name string, at time.Time) {
	if i, ok := stamps.ObjectIndex(name); ok && i < len(r.queued) {
		r.queued[i].CompareAndSwap(0, int64(at.Sub(r.base))+1)
	}
}

// observeAt records a reconcile that the reconciler's process made at the
// wall-clock instant at (read from its stamps file).
func (r *recorder) observeAt(name string, at time.Time) {
	t := int64(at.Sub(r.base)) + 1
	if name == r.probe {
		r.probeOnce.Do(func() { close(r.probeSeen) })
		return
	}
	i, ok := stamps.ObjectIndex(name)
	if !ok || i >= len(r.seen) {
		r.others.Add(1)
		return
	}
	r.reconciles.Add(1)
	if r.seen[i].CompareAndSwap(0, t) && r.remaining.Add(-1) == 0 {
		close(r.allSeen)
	}
}

// summary is a run's figures.
type summary struct {
	total, create time.Duration
	// Latency from the instant the Create was sent: the end-to-end figure,
	// which includes the API server's write and watch, never negative.
	sent percentiles
	// Latency from the instant the Create call returned: a later stand-in
	// for "committed", negative when the watch event beat the response.
	returned percentiles
	// From the side's queueing of the event to the first reconcile: the
	// queue and the hand-over to the worker, without the API server.
	dispatch                        percentiles
	negative, missing, missingQueue int
	reconciles, others              int64
}

// percentiles of one latency over the objects of a run.
type percentiles struct{ p50, p99, max time.Duration }

func percentilesOf(values []time.Duration) percentiles {
	slices.Sort(values)
	var p percentiles
	p.p50, p.p99 = percentile(values, 0.50), percentile(values, 0.99)
	if n := len(values); n > 0 {
		p.max = values[n-1]
	}
	return p
}

func (r *recorder) summary() summary {
	var s summary
	first := r.firstSent.Load()
	var lastCreated, lastSeen int64
	fromSent := make([]time.Duration, 0, len(r.seen))
	fromReturned := make([]time.Duration, 0, len(r.seen))
	fromQueued := make([]time.Duration, 0, len(r.seen))
	for i := range r.seen {
		c, t := r.created[i].Load(), r.seen[i].Load()
		lastCreated = max(lastCreated, c)
		if t == 0 || c == 0 {
			s.missing++
			continue
		}
		lastSeen = max(lastSeen, t)
		fromSent = append(fromSent, time.Duration(t-r.sent[i].Load()))
		d := time.Duration(t - c)
		if d < 0 {
			// The watch event reached the reconciler before the Create
			// response reached the creator: counted, and kept in the
			// percentiles as the negative value it is.
			s.negative++
		}
		fromReturned = append(fromReturned, d)
		if q := r.queued[i].Load(); q != 0 {
			fromQueued = append(fromQueued, time.Duration(t-q))
		} else {
			s.missingQueue++
		}
	}
	s.total = time.Duration(lastSeen - first)
	s.create = time.Duration(lastCreated - first)
	s.sent, s.returned, s.dispatch = percentilesOf(fromSent), percentilesOf(fromReturned), percentilesOf(fromQueued)
	s.reconciles, s.others = r.reconciles.Load(), r.others.Load()
	return s
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p+0.999999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func (s summary) String() string {
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }
	p := func(prefix string, v percentiles) string {
		return fmt.Sprintf("%sp50_ms=%s %sp99_ms=%s %smax_ms=%s", prefix, ms(v.p50), prefix, ms(v.p99), prefix, ms(v.max))
	}
	return fmt.Sprintf("total_s=%.3f create_s=%.3f %s %s %s negative=%d missing=%d missing_queued=%d reconciles=%d others=%d",
		s.total.Seconds(), s.create.Seconds(), p("sent_", s.sent), p("returned_", s.returned), p("dispatch_", s.dispatch),
		s.negative, s.missing, s.missingQueue, s.reconciles, s.others)
}

// selfCPUSeconds is the CPU time (user + system) this process has used so
// far: the creator's and the measurement's.
func selfCPUSeconds() float64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()).Seconds()
}

// selfRSSKiB is this process's resident set (VmRSS), 0 if unknown.
func selfRSSKiB() int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if rest, ok := strings.CutPrefix(scanner.Text(), "VmRSS:"); ok {
			kib, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kib
		}
	}
	return 0
}
