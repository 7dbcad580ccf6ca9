package workqueue_test

// The real sidecar binary, started per test: these tests mock nothing.
//
// TestMain finds the binary: $WQS_SIDECAR_BIN, or else it runs
// `cargo build --bin workqueue-sidecar` in the repository with
// CARGO_TARGET_DIR defaulting to the project's cache dir, as hack/test does.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

var (
	sidecarBin string
	// sidecarHasAdmin: the binary has an admin HTTP listener (--admin), which
	// the tests turn off so that parallel sidecars do not fight for its port.
	sidecarHasAdmin bool
)

func TestMain(m *testing.M) {
	bin, err := locateSidecar()
	if err != nil {
		fmt.Fprintln(os.Stderr, "workqueue tests:", err)
		os.Exit(1)
	}
	sidecarBin = bin
	help, err := exec.Command(bin, "--help").Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "workqueue tests: %s --help: %v\n", bin, err)
		os.Exit(1)
	}
	sidecarHasAdmin = strings.Contains(string(help), "--admin")
	os.Exit(m.Run())
}

func locateSidecar() (string, error) {
	if bin := os.Getenv("WQS_SIDECAR_BIN"); bin != "" {
		return bin, nil
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, "Cargo.toml")); err != nil {
		return "", fmt.Errorf("no Cargo.toml at %s: set WQS_SIDECAR_BIN to the sidecar binary", root)
	}
	target := os.Getenv("CARGO_TARGET_DIR")
	if target == "" {
		cache := os.Getenv("WQS_CACHE_DIR")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			cache = filepath.Join(home, ".cache", "workqueue-sidecar")
		}
		target = filepath.Join(cache, "target")
	}
	cmd := exec.Command("cargo", "build", "--bin", "workqueue-sidecar")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CARGO_TARGET_DIR="+target)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("cargo build --bin workqueue-sidecar: %w", err)
	}
	return filepath.Join(target, "debug", "workqueue-sidecar"), nil
}

// sidecar is one running workqueue-sidecar process.
type sidecar struct {
	t      *testing.T
	cmd    *exec.Cmd
	target string // what Dial takes
	exited chan struct{}
	err    error // the process's exit, once exited is closed

	mu   sync.Mutex
	logs []string
}

// startSidecar runs the binary with args; without a --tcp or --unix in args
// it listens on a free loopback port. It waits until the sidecar listens.
func startSidecar(t *testing.T, args ...string) *sidecar {
	t.Helper()
	joined := strings.Join(args, " ")
	if !strings.Contains(joined, "--tcp") && !strings.Contains(joined, "--unix") {
		args = append(args, "--tcp", "127.0.0.1:0")
	}
	if sidecarHasAdmin {
		args = append(args, "--admin", "off")
	}
	args = append(args, "--log", "info")
	s := &sidecar{t: t, exited: make(chan struct{})}
	s.cmd = exec.Command(sidecarBin, args...)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", sidecarBin, err)
	}
	listening := make(chan string, 2)
	go func() {
		scanner := bufio.NewScanner(stderr)
		for scanner.Scan() {
			line := scanner.Text()
			if target, ok := listenTarget(line); ok {
				listening <- target
			}
			s.mu.Lock()
			s.logs = append(s.logs, line)
			s.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
		if t.Failed() {
			t.Logf("sidecar logs:\n%s", s.Logs())
		}
	})
	select {
	case s.target = <-listening:
	case <-s.exited:
		t.Fatalf("the sidecar exited before listening (%v); logs:\n%s", s.err, s.Logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("the sidecar did not report its address; logs:\n%s", s.Logs())
	}
	return s
}

// listenTarget reads `listening transport="tcp" address=127.0.0.1:PORT` or
// `listening transport="unix" path=/x/sock` from a log line.
func listenTarget(line string) (string, bool) {
	if _, rest, ok := strings.Cut(line, `transport="tcp" address=`); ok {
		return strings.Fields(rest)[0], true
	}
	if _, rest, ok := strings.Cut(line, `transport="unix" path=`); ok {
		return "unix://" + strings.Fields(rest)[0], true
	}
	return "", false
}

func (s *sidecar) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.logs, "\n")
}

func (s *sidecar) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits for the process to exit and returns its exit error.
func (s *sidecar) wait(timeout time.Duration) error {
	s.t.Helper()
	select {
	case <-s.exited:
		return s.err
	case <-time.After(timeout):
		s.t.Fatalf("the sidecar did not exit within %s; logs:\n%s", timeout, s.Logs())
		return nil
	}
}

// writeConfig writes a sidecar config file and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// dial connects a client to s, logging into the test's output.
func dial(t *testing.T, s *sidecar) *workqueue.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := workqueue.Dial(ctx, s.target, workqueue.WithLogger(testLogger(t)), workqueue.WithWorkerName(t.Name()))
	if err != nil {
		t.Fatalf("dial %s: %v", s.target, err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// testLogger writes slog records into the test's log until the test ends
// (a reconcile goroutine may still log after that).
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// eventually polls cond every 20 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runWorker runs q.Run in the background; the returned stop cancels it and
// returns Run's error (failing the test if Run does not return in time).
func runWorker(t *testing.T, q *workqueue.Queue, concurrency int, r workqueue.Reconciler, opts ...workqueue.WorkOption) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx, concurrency, r, opts...) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Errorf("Run did not return within 30s of its context's cancellation")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}
