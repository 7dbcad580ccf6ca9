package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// stampsSide is a reconciler in another process, started by the script
// before this program: bench/remote's (this program's serve mode, or the
// sidecar's Go worker, both writing through internal/stamps) or bench/kopf's
// (the Python worker, or a kopf operator). That process appends one line
// per reconcile to a file,
//
//	NAME RECONCILED_UNIX_NS [QUEUED_UNIX_NS]
//
// with the wall-clock instant its handler was called and, when the side has
// one, the instant the object was queued (the sidecar's enqueued_at, or
// controller-runtime's event handler); this side follows the file and hands
// the lines to the recorder, so the creator and the figures are this
// program's for every side. The instants are the machine's wall clock, read
// by both processes.
type stampsSide struct {
	path    string
	name    string
	poll    time.Duration
	cancel  context.CancelFunc
	done    chan error
	lines   int
	badLine string
}

func (s *stampsSide) program() string { return s.name }

func (s *stampsSide) start(ctx context.Context, rec *recorder) error {
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("the reconciler's stamps file: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() {
		defer f.Close()
		s.done <- s.follow(runCtx, f, rec)
	}()
	return nil
}

// follow reads the lines appended to f until ctx ends, polling every s.poll
// once it has read all there was; a line is handled only once its newline
// arrived.
func (s *stampsSide) follow(ctx context.Context, f *os.File, rec *recorder) error {
	buf := make([]byte, 64<<10)
	var pending []byte
	for {
		n, err := f.Read(buf)
		if n > 0 {
			pending = append(pending, buf[:n]...)
			for {
				i := bytes.IndexByte(pending, '\n')
				if i < 0 {
					break
				}
				s.handle(string(pending[:i]), rec)
				pending = pending[i+1:]
			}
			continue
		}
		if err != nil && err != io.EOF {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.poll):
		}
	}
}

func (s *stampsSide) handle(line string, rec *recorder) {
	fields := bytes.Fields([]byte(line))
	if len(fields) < 2 {
		s.bad(line)
		return
	}
	name := string(fields[0])
	reconciled, err := strconv.ParseInt(string(fields[1]), 10, 64)
	if err != nil {
		s.bad(line)
		return
	}
	s.lines++
	if len(fields) > 2 {
		if queued, err := strconv.ParseInt(string(fields[2]), 10, 64); err == nil && queued > 0 {
			rec.queuedAt(name, time.Unix(0, queued))
		}
	}
	rec.observeAt(name, time.Unix(0, reconciled))
}

func (s *stampsSide) bad(line string) {
	if s.badLine == "" {
		s.badLine = line
	}
}

// describe is read after stop, when follow has returned.
func (s *stampsSide) describe() string {
	d := fmt.Sprintf("stamp_lines=%d", s.lines)
	if s.badLine != "" {
		d += fmt.Sprintf(" bad_line=%q", s.badLine)
	}
	return d
}

func (s *stampsSide) stop() error {
	s.cancel()
	select {
	case err := <-s.done:
		return err
	case <-time.After(10 * time.Second):
		return fmt.Errorf("the stamps reader did not stop within 10s")
	}
}
