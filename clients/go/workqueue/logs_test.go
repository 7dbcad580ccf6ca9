package workqueue_test

// A logger whose records a test can count: the client's logs are part of
// what it promises (one line per lost lease, progress while Dial waits).

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

// logRecord is one record the client logged, with its attributes (the
// logger's own, from With, too) as text by key.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (r logRecord) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q", r.level, r.msg)
	for k, v := range r.attrs {
		fmt.Fprintf(&b, " %s=%q", k, v)
	}
	return b.String()
}

// logCapture keeps every record of the loggers made by captureLogs.
type logCapture struct {
	mu      sync.Mutex
	records []logRecord
}

// captureLogs is a logger that records what it is given and also writes it
// into the test's output (testLogger).
func captureLogs(t *testing.T) (*slog.Logger, *logCapture) {
	c := &logCapture{}
	return slog.New(&captureHandler{capture: c, next: testLogger(t).Handler()}), c
}

// matching returns the records for which keep holds, oldest first.
func (c *logCapture) matching(keep func(logRecord) bool) []logRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []logRecord
	for _, r := range c.records {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

type captureHandler struct {
	capture *logCapture
	attrs   []slog.Attr
	next    slog.Handler
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) Handle(ctx context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.capture.mu.Lock()
	h.capture.records = append(h.capture.records, rec)
	h.capture.mu.Unlock()
	return h.next.Handle(ctx, r)
}

func (h *captureHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &captureHandler{capture: h.capture, attrs: append(h.attrs[:len(h.attrs):len(h.attrs)], attrs...), next: h.next.WithAttrs(attrs)}
}

// WithGroup keeps the group's attributes unqualified: the client logs none.
func (h *captureHandler) WithGroup(name string) slog.Handler {
	return &captureHandler{capture: h.capture, attrs: h.attrs, next: h.next.WithGroup(name)}
}

// dialCapturing is dial with the client's logs captured.
func dialCapturing(t *testing.T, s *sidecar) (*workqueue.Client, *logCapture) {
	t.Helper()
	logger, logs := captureLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := workqueue.Dial(ctx, s.Target, workqueue.WithLogger(logger), workqueue.WithWorkerName(t.Name()))
	if err != nil {
		t.Fatalf("dial %s: %v", s.Target, err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client, logs
}
