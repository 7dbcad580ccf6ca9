package workqueue

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueuev1"
)

// maxMessageBytes matches the sidecar's own limit (16 MiB): a lease carrying
// a large cached object, or a page of a listing, fits.
const maxMessageBytes = 16 << 20

// streamWindowBytes and connWindowBytes are the HTTP/2 flow-control windows
// the client grants per stream and per connection (grpc-go's dynamic window
// grows to 16 MiB at most, from 64 KiB).
const (
	streamWindowBytes = 4 << 20
	connWindowBytes   = 16 << 20
)

// dialProgressEvery is how often Dial, waiting for a sidecar it cannot
// reach, says so: in a pod the sidecar's container may start after the
// worker's, so Dial waits, but not silently, and not a line per attempt.
const dialProgressEvery = 10 * time.Second

// Client is a connection to one sidecar. It is safe for concurrent use; make
// one per process and share it.
type Client struct {
	conn    *grpc.ClientConn
	queue   workqueuev1.WorkQueueServiceClient
	cache   workqueuev1.CacheServiceClient
	objects workqueuev1.ObjectServiceClient
	logger  *slog.Logger
	worker  string
}

// DialOption configures [Dial].
type DialOption func(*dialConfig)

type dialConfig struct {
	logger   *slog.Logger
	worker   string
	creds    credentials.TransportCredentials
	grpcOpts []grpc.DialOption
}

// WithLogger sets the logger for the client and its workers (default
// [slog.Default]).
func WithLogger(logger *slog.Logger) DialOption {
	return func(c *dialConfig) { c.logger = logger }
}

// WithWorkerName sets the name the sidecar shows as the holder of this
// client's leases (KeyState's holder). The default is "hostname/pid".
func WithWorkerName(name string) DialOption {
	return func(c *dialConfig) { c.worker = name }
}

// WithTLS connects over TLS with config, for a sidecar started with
// --tls-cert and --tls-key. Trust the sidecar's CA with config.RootCAs (nil
// means the system's roots); for a sidecar started with --tls-client-ca
// (mTLS), give the client's certificate in config.Certificates, or in
// config.GetClientCertificate to pick up a rotated one:
//
//	ca, err := os.ReadFile("/etc/wq-tls/ca.crt")
//	...
//	roots := x509.NewCertPool()
//	roots.AppendCertsFromPEM(ca)
//	cert, err := tls.LoadX509KeyPair("/etc/wq-tls/tls.crt", "/etc/wq-tls/tls.key")
//	...
//	client, err := workqueue.Dial(ctx, "wq.example:50051", workqueue.WithTLS(&tls.Config{
//		RootCAs:      roots,
//		Certificates: []tls.Certificate{cert},
//	}))
//
// The server name checked is the target's host unless config.ServerName
// says otherwise. Without WithTLS the connection is plaintext.
func WithTLS(config *tls.Config) DialOption {
	return func(c *dialConfig) { c.creds = credentials.NewTLS(config) }
}

// WithGRPCOptions adds gRPC dial options, after the client's own (transport
// credentials, 16 MiB messages, fixed 4 MiB stream and 16 MiB connection
// flow-control windows, a reconnect backoff of at most 5 s), so theirs win
// where both set the same thing.
func WithGRPCOptions(opts ...grpc.DialOption) DialOption {
	return func(c *dialConfig) { c.grpcOpts = append(c.grpcOpts, opts...) }
}

// Dial connects to a sidecar and waits until the connection is ready or ctx
// is done: a sidecar that is not up yet (in a pod its container may start
// after the worker's) is waited for, logged at INFO with the last
// connection error after the first failed attempt and then every 10 s, and
// an error for ctx's end names target and that connection error. target is
// a unix socket ("unix:///var/run/wq/sock", or just an absolute path) or a
// TCP address ("127.0.0.1:50051"). The connection is plaintext, as the
// sidecar serves loopback and a socket shared inside the pod, unless
// [WithTLS] is given. It reconnects by itself if the sidecar restarts.
func Dial(ctx context.Context, target string, opts ...DialOption) (*Client, error) {
	cfg := dialConfig{logger: slog.Default(), worker: defaultWorkerName(), creds: insecure.NewCredentials()}
	for _, opt := range opts {
		opt(&cfg)
	}
	if strings.HasPrefix(target, "/") {
		target = "unix://" + target
	}
	grpcOpts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(cfg.creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)),
		// Fixed flow-control windows. Without them grpc-go estimates the
		// bandwidth-delay product by sending a PING after every data frame
		// that follows the last PING's ack: on a Work stream, where a Lease
		// or a FinishAck comes alone, that is one more write and one more read
		// per message, for the worker and the sidecar alike. To a local
		// sidecar the round trip is short, so these windows are never what
		// holds a transfer back.
		grpc.WithInitialWindowSize(streamWindowBytes),
		grpc.WithInitialConnWindowSize(connWindowBytes),
		// The sidecar is local: a restart takes seconds, so do not back off
		// to grpc's default two minutes between connection attempts.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	}, cfg.grpcOpts...)
	conn, err := grpc.NewClient(target, grpcOpts...)
	if err != nil {
		return nil, fmt.Errorf("workqueue: dial %s: %w", target, err)
	}
	if err := waitReady(ctx, conn, target, cfg.logger); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("workqueue: dial %s: %w", target, err)
	}
	return &Client{
		conn:    conn,
		queue:   workqueuev1.NewWorkQueueServiceClient(conn),
		cache:   workqueuev1.NewCacheServiceClient(conn),
		objects: workqueuev1.NewObjectServiceClient(conn),
		logger:  cfg.logger,
		worker:  cfg.worker,
	}, nil
}

// waitReady waits until conn is ready or ctx ends. While the sidecar cannot
// be reached it logs so, with the last connection error, after the first
// failure and then every dialProgressEvery; when ctx ends first, the error
// carries that last connection error (a refused port, a socket that does
// not exist, a certificate that does not verify), not only that ctx ended.
func waitReady(ctx context.Context, conn *grpc.ClientConn, target string, log *slog.Logger) error {
	conn.Connect()
	var lastErr string
	var logged time.Time
	for {
		state := conn.GetState()
		if state == connectivity.Ready {
			if !logged.IsZero() {
				log.Info("connected to the sidecar", "target", target)
			}
			return nil
		}
		if state == connectivity.TransientFailure {
			if why := connectionError(conn); why != "" {
				lastErr = why
			}
			if logged.IsZero() || time.Since(logged) >= dialProgressEvery {
				log.Info("waiting for the sidecar", "target", target, "err", lastErr)
				logged = time.Now()
			}
		}
		// Woken every dialProgressEvery as well: a connection that keeps
		// failing stays in TransientFailure, one state change for them all.
		wait, cancel := context.WithTimeout(ctx, dialProgressEvery)
		conn.WaitForStateChange(wait, state)
		cancel()
		if ctx.Err() == nil {
			continue
		}
		if conn.GetState() == connectivity.TransientFailure {
			if why := connectionError(conn); why != "" {
				lastErr = why
			}
		}
		if lastErr == "" {
			return fmt.Errorf("%w before a connection attempt ended", context.Cause(ctx))
		}
		return fmt.Errorf("%w waiting for the sidecar; last connection error: %s", context.Cause(ctx), lastErr)
	}
}

// connectionError is why conn's last connection attempt failed, or "" if
// it cannot tell. grpc keeps that error for the calls it fails fast while
// the connection is in TransientFailure, so one quick call fetches it.
func connectionError(conn *grpc.ClientConn) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable {
		return ""
	}
	return status.Convert(err).Message()
}

func defaultWorkerName() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// Close closes the connection. Calls in flight fail, and workers still
// running on it see their streams break: their reconciles are cancelled and
// Run returns an error.
func (c *Client) Close() error {
	return c.conn.Close()
}

// Conn is the underlying gRPC connection, for the generated stubs in
// package workqueuev1 (e.g. a call this package does not wrap).
func (c *Client) Conn() *grpc.ClientConn {
	return c.conn
}
