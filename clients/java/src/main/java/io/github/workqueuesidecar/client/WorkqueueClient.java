package io.github.workqueuesidecar.client;

import io.grpc.ManagedChannel;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.unix.DomainSocketAddress;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import workqueue.v1.CacheServiceGrpc;
import workqueue.v1.ObjectServiceGrpc;
import workqueue.v1.WorkQueueServiceGrpc;

/**
 * A connection to a workqueue-sidecar: its queues ({@link #queue}), informer caches ({@link
 * #cache}) and object writes ({@link #objects}). One per process; thread-safe. Closing it stops its
 * running workers gracefully, then closes the connection.
 *
 * <pre>{@code
 * try (WorkqueueClient client = WorkqueueClient.connect("unix:///var/run/wq/sock")) {
 *   client.queue("users").run(reconciler, RunOptions.concurrency(4));
 * }
 * }</pre>
 */
public final class WorkqueueClient implements AutoCloseable {
  /** Largest message accepted: a page of cached objects can be large. */
  private static final int MAX_INBOUND_MESSAGE_BYTES = 64 << 20;

  private final String target;
  private final ManagedChannel channel;
  private final EventLoopGroup eventLoop; // for unix sockets; null otherwise
  private final ClientOptions options;
  private final List<Worker> workers = new CopyOnWriteArrayList<>();
  final WorkQueueServiceGrpc.WorkQueueServiceBlockingStub queueStub;
  final WorkQueueServiceGrpc.WorkQueueServiceStub queueAsync;
  final CacheServiceGrpc.CacheServiceBlockingStub cacheStub;
  final ObjectServiceGrpc.ObjectServiceBlockingStub objectStub;

  private WorkqueueClient(String target, ManagedChannel channel, EventLoopGroup eventLoop, ClientOptions options) {
    this.target = target;
    this.channel = channel;
    this.eventLoop = eventLoop;
    this.options = options;
    this.queueStub = WorkQueueServiceGrpc.newBlockingStub(channel);
    this.queueAsync = WorkQueueServiceGrpc.newStub(channel);
    this.cacheStub = CacheServiceGrpc.newBlockingStub(channel);
    this.objectStub = ObjectServiceGrpc.newBlockingStub(channel);
  }

  /** Connects with the default options; see {@link #connect(String, ClientOptions)}. */
  public static WorkqueueClient connect(String target) {
    return connect(target, ClientOptions.defaults());
  }

  /**
   * Connects to the sidecar at {@code target}: {@code unix:///path/to/socket} (or {@code
   * unix:/path}, Linux only, through netty's epoll transport) or {@code host:port} (any gRPC target,
   * e.g. {@code dns:///host:port}). Plaintext (the sidecar listens on a pod-local socket or
   * loopback) unless {@code options} ask for TLS ({@link ClientOptions#tls(java.nio.file.Path)}, TCP
   * targets only); TLS files that cannot be read or used fail here ({@link
   * java.io.UncheckedIOException}, {@link IllegalArgumentException}). The connection is made lazily
   * and remade by itself; calls fail with {@link UnavailableException} while the sidecar cannot be
   * reached, and with {@link TlsHandshakeException} (an {@code UnavailableException}) while the TLS
   * handshake fails.
   */
  public static WorkqueueClient connect(String target, ClientOptions options) {
    Objects.requireNonNull(target, "target");
    Objects.requireNonNull(options, "options");
    String socket = unixPath(target);
    NettyChannelBuilder builder;
    EventLoopGroup group = null;
    if (socket != null) {
      if (options.tls().isPresent()) {
        throw new IllegalArgumentException("workqueue: " + target + ": TLS is for a TCP target; the sidecar's unix socket serves plaintext");
      }
      if (!Epoll.isAvailable()) {
        throw new IllegalStateException("workqueue: " + target + ": unix sockets need netty's epoll transport (Linux x86_64)", Epoll.unavailabilityCause());
      }
      group = new EpollEventLoopGroup(1, daemonThreads("workqueue-grpc-epoll"));
      builder = NettyChannelBuilder.forAddress(new DomainSocketAddress(socket))
          .eventLoopGroup(group)
          .channelType(EpollDomainSocketChannel.class)
          // grpc-java would send the socket path as :authority, which the
          // sidecar's HTTP/2 server refuses as malformed (PROTOCOL_ERROR).
          .overrideAuthority("localhost")
          .usePlaintext();
    } else if (options.tls().isPresent()) {
      try {
        builder = NettyChannelBuilder.forTarget(target, options.tls().get().credentials());
      } catch (IllegalArgumentException e) { // netty could not use the certificates or the key
        throw new IllegalArgumentException("workqueue: TLS files " + options.tls().get() + ": " + rootMessage(e) + options.tls().get().keyHint(), e);
      }
    } else {
      builder = NettyChannelBuilder.forTarget(target).usePlaintext();
    }
    ManagedChannel channel = builder.maxInboundMessageSize(MAX_INBOUND_MESSAGE_BYTES).build();
    return new WorkqueueClient(target, channel, group, options);
  }

  private static String rootMessage(Throwable t) {
    StringBuilder out = new StringBuilder(String.valueOf(t.getMessage()));
    for (Throwable c = t.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
      out.append(": ").append(c.getMessage());
    }
    return out.toString();
  }

  /** The socket path of a unix target, or null for any other target. */
  static String unixPath(String target) {
    if (target.startsWith("unix://")) {
      return target.substring("unix://".length());
    }
    if (target.startsWith("unix:")) {
      return target.substring("unix:".length());
    }
    return null;
  }

  /** A handle on the queue {@code name} (a sidecar without a config file has one, "default"). */
  public Queue queue(String name) {
    return new Queue(this, Objects.requireNonNull(name, "name"), null, "");
  }

  /** Reads from the sidecar's informer caches. */
  public Cache cache() {
    return new Cache(this);
  }

  /** Writes Kubernetes objects through the sidecar (ObjectService). */
  public ObjectWrites objects() {
    return new ObjectWrites(this);
  }

  /** The underlying channel, for the generated stubs. */
  public ManagedChannel channel() {
    return channel;
  }

  /** The target this client was connected to. */
  public String target() {
    return target;
  }

  ClientOptions options() {
    return options;
  }

  void register(Worker worker) {
    workers.add(worker);
  }

  void unregister(Worker worker) {
    workers.remove(worker);
  }

  /** Stops running workers gracefully (each within its stop timeout), then closes the connection. */
  @Override
  public void close() {
    for (Worker w : workers) {
      w.stop();
    }
    for (Worker w : workers) {
      w.done().handle((ok, err) -> null).join();
    }
    channel.shutdown();
    try {
      if (!channel.awaitTermination(5, TimeUnit.SECONDS)) {
        channel.shutdownNow();
      }
    } catch (InterruptedException e) {
      channel.shutdownNow();
      Thread.currentThread().interrupt();
    }
    if (eventLoop != null) {
      eventLoop.shutdownGracefully(0, 1, TimeUnit.SECONDS);
    }
  }

  static java.util.concurrent.ThreadFactory daemonThreads(String prefix) {
    java.util.concurrent.atomic.AtomicInteger n = new java.util.concurrent.atomic.AtomicInteger();
    return r -> {
      Thread t = new Thread(r, prefix + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }
}
