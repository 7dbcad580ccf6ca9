// Package stamps is what bench/remote's reconciler processes share: the
// measured objects' names, and the file each appends its reconciles to for
// the measuring process (remote-go's stamps mode) to follow.
package stamps

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// objectPrefix starts the name of every measured ConfigMap.
const objectPrefix = "cm-"

// ObjectName is the name of measured object i.
func ObjectName(i int) string { return fmt.Sprintf("%s%05d", objectPrefix, i) }

// ObjectIndex is the index of the measured object called name; false for
// any other name (the probe, or something else in the namespace).
func ObjectIndex(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, objectPrefix)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(digits)
	return i, err == nil && i >= 0
}

// Writer appends a line per reconcile to a file, in the format the
// measurement follows (NAME RECONCILED_UNIX_NS [QUEUED_UNIX_NS], see
// remote-go's stampsSide): the
// wall-clock instant of the reconcile and of the object's first queued
// event, when the reconciler told one. Each line is one write, at once: no
// timer, so the process wakes for nothing else, and the cost is the same
// for every reconciler.
type Writer struct {
	mu     sync.Mutex
	file   *os.File
	line   []byte
	failed error
	queued []atomic.Int64 // wall-clock ns, per measured object
}

func NewWriter(path string, objects int) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("the stamps file: %w", err)
	}
	return &Writer{file: f, queued: make([]atomic.Int64, objects)}, nil
}

func (w *Writer) QueuedAt(name string, at time.Time) {
	if i, ok := ObjectIndex(name); ok && i < len(w.queued) {
		w.queued[i].CompareAndSwap(0, at.UnixNano())
	}
}

func (w *Writer) Observe(name string) {
	now := time.Now().UnixNano()
	var queued int64
	if i, ok := ObjectIndex(name); ok && i < len(w.queued) {
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

func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return fmt.Errorf("writing the stamps file: %w", w.failed)
	}
	return nil
}

func (w *Writer) Close() { _ = w.file.Close() }
