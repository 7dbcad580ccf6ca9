package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// serve runs a reconciler alone, without the creator, until SIGTERM or
// SIGINT: its reconciles go to the -stamps file (stampWriter) for the
// stamps mode of another process to measure. So the figures of this
// process's own CPU and memory, read by the script, are the reconciling
// side's alone, as for bench/kopf's reconcilers.
func serve(ctx context.Context, o options, config *rest.Config, r reconciler) error {
	stamps, err := newStampWriter(o.stamps, o.objects)
	if err != nil {
		return err
	}
	defer stamps.close()
	ctx, stopSignals := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	if err := r.start(ctx, o, config, stamps); err != nil {
		return fmt.Errorf("%s: start: %w", r.program(), err)
	}
	// The script waits for this line before it starts the creator.
	fmt.Printf("serving program=%s %s\n", r.program(), r.describe())
	<-ctx.Done()
	if err := r.stop(); err != nil {
		return err
	}
	return stamps.err()
}

// stampWriter appends a line per reconcile to a file, in the stamps mode's
// format (NAME RECONCILED_UNIX_NS [QUEUED_UNIX_NS], see stampsSide): the
// wall-clock instant of the reconcile and of the object's first queued
// event, when the reconciler told one. Each line is one write, at once: no
// timer, so the process wakes for nothing else, and the cost is the same
// for every reconciler.
type stampWriter struct {
	mu     sync.Mutex
	file   *os.File
	line   []byte
	failed error
	queued []atomic.Int64 // wall-clock ns, per measured object
}

func newStampWriter(path string, objects int) (*stampWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("the stamps file: %w", err)
	}
	return &stampWriter{file: f, queued: make([]atomic.Int64, objects)}, nil
}

func (w *stampWriter) queuedAt(name string, at time.Time) {
	if i, ok := objectIndex(name); ok && i < len(w.queued) {
		w.queued[i].CompareAndSwap(0, at.UnixNano())
	}
}

func (w *stampWriter) observe(name string) {
	now := time.Now().UnixNano()
	var queued int64
	if i, ok := objectIndex(name); ok && i < len(w.queued) {
		queued = w.queued[i].Load()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.line = append(w.line[:0], name...)
	w.line = append(w.line, ' ')
	w.line = strconv.AppendInt(w.line, now, 10)
	if queued != 0 {
		w.line = append(w.line, ' ')
		w.line = strconv.AppendInt(w.line, queued, 10)
	}
	w.line = append(w.line, '\n')
	if _, err := w.file.Write(w.line); err != nil && w.failed == nil {
		w.failed = err
	}
}

func (w *stampWriter) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return fmt.Errorf("writing the stamps file: %w", w.failed)
	}
	return nil
}

func (w *stampWriter) close() { _ = w.file.Close() }
