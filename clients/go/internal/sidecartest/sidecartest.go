// Package sidecartest runs the real workqueue-sidecar binary for tests: the
// Go client's tests and its examples' end-to-end tests mock nothing.
//
// [Binary] finds the binary: $WQS_SIDECAR_BIN, or else it runs
// `cargo build --bin workqueue-sidecar` at the repository root with
// CARGO_TARGET_DIR defaulting to the project's cache dir, as hack/test does.
package sidecartest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// kubectlTimeout bounds one [Kubectl] command: a kubectl that waits on
// something that never comes (a finalizer nobody removes) fails its test
// instead of the whole package.
const kubectlTimeout = 2 * time.Minute

// stopGrace is how long a test's sidecar has to exit after SIGTERM, as the
// Python, TypeScript and Java test harnesses give it.
const stopGrace = 10 * time.Second

var (
	once     sync.Once
	bin      string
	hasAdmin bool
	binErr   error
)

// Binary returns the sidecar binary's path, building it once per process.
func Binary() (string, error) {
	once.Do(func() {
		bin, binErr = locate()
		if binErr != nil {
			return
		}
		help, err := exec.Command(bin, "--help").Output()
		if err != nil {
			binErr = fmt.Errorf("%s --help: %w", bin, err)
			return
		}
		// A sidecar with an admin HTTP listener: tests turn it off so that
		// parallel sidecars do not fight for its port.
		hasAdmin = strings.Contains(string(help), "--admin")
	})
	return bin, binErr
}

// RepoRoot is the repository's root: the nearest parent of the working
// directory with a Cargo.toml.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "Cargo.toml")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no Cargo.toml above the working directory: set WQS_SIDECAR_BIN to the sidecar binary")
		}
		dir = parent
	}
}

func locate() (string, error) {
	if bin := os.Getenv("WQS_SIDECAR_BIN"); bin != "" {
		return bin, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
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

// Sidecar is one running workqueue-sidecar process, killed when its test
// ends (its logs are printed if the test failed).
type Sidecar struct {
	// Target is what workqueue.Dial takes: 127.0.0.1:PORT or unix:///path.
	Target string

	t      testing.TB
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the process's exit, once exited is closed

	mu   sync.Mutex
	logs []string
}

// Start runs the sidecar with args; without a --tcp or --unix in args it
// listens on a free loopback port. It returns once the sidecar listens. The
// process inherits the test's environment (e.g. KUBECONFIG).
func Start(t testing.TB, args ...string) *Sidecar {
	t.Helper()
	path, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(args, " ")
	if !strings.Contains(joined, "--tcp") && !strings.Contains(joined, "--unix") {
		args = append(args, "--tcp", "127.0.0.1:0")
	}
	if hasAdmin && !strings.Contains(joined, "--admin") {
		args = append(args, "--admin", "off")
	}
	if !strings.Contains(joined, "--log ") {
		args = append(args, "--log", "info")
	}
	s := &Sidecar{t: t, exited: make(chan struct{})}
	s.cmd = exec.Command(path, args...)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	listening := make(chan string, 2)
	go func() {
		scanner := bufio.NewScanner(stderr)
		scanner.Buffer(make([]byte, 64*1024), 1024*1024)
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
		// As a pod's container is stopped: SIGTERM, so the sidecar drains and
		// leaves (a shard replica then drops its Lease's finalizer), and
		// SIGKILL only if it has not exited after stopGrace.
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(stopGrace):
			t.Logf("the sidecar did not exit within %s of SIGTERM; killing it", stopGrace)
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("sidecar logs:\n%s", s.Logs())
		}
	})
	select {
	case s.Target = <-listening:
	case <-s.exited:
		t.Fatalf("the sidecar exited before listening (%v); logs:\n%s", s.err, s.Logs())
	case <-time.After(60 * time.Second):
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

// Logs is everything the sidecar wrote to stderr so far.
func (s *Sidecar) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.logs, "\n")
}

// Signal sends sig to the sidecar.
func (s *Sidecar) Signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v: %v", sig, err)
	}
}

// Wait waits for the process to exit and returns its exit error.
func (s *Sidecar) Wait(timeout time.Duration) error {
	s.t.Helper()
	select {
	case <-s.exited:
		return s.err
	case <-time.After(timeout):
		s.t.Fatalf("the sidecar did not exit within %s; logs:\n%s", timeout, s.Logs())
		return nil
	}
}

// WriteConfig writes a sidecar config file into the test's temp dir and
// returns its path.
func WriteConfig(t testing.TB, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Kubectl runs the control plane's kubectl (hack/control-plane kubectl)
// against $WQS_KUBECONFIG, the control plane the tests were given, with
// stdin as its input. It returns stdout, or an error carrying stderr.
func Kubectl(stdin string, args ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack/control-plane"),
		append([]string{"kubectl", "--kubeconfig=" + os.Getenv("WQS_KUBECONFIG")}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, exit.Stderr)
		}
		return "", err
	}
	return string(out), nil
}
