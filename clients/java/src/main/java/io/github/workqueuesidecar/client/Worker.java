package io.github.workqueuesidecar.client;

import io.grpc.Status;
import java.lang.System.Logger.Level;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * A running worker of one queue ({@link Queue#start}): it holds one Work stream at a time, reopens
 * it with backoff when it breaks, and runs reconciles on a fixed pool of {@code concurrency}
 * threads. {@link #close()} stops it gracefully: nothing new starts, running reconciles get the
 * stop timeout to finish and their results are sent, and keys not started go back to the queue.
 *
 * <p>One thread, the stream thread, owns every send on the stream, every lease's state and timers
 * (extends every third of the TTL, the deadline) and the credits; reconcile threads only call the
 * reconciler and hand the outcome back to it.
 */
public final class Worker implements AutoCloseable {
  private static final ClientLog LOG = ClientLog.of(Worker.class);
  /** Bounds the wait for Opened after Open: a sidecar that accepted the stream answers at once. */
  static final Duration OPEN_TIMEOUT = Duration.ofSeconds(10);
  /** Bounds the wait for the sidecar to end the stream after the worker half-closed it. */
  static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(5);
  /** Stands in if Opened carries no lease TTL. */
  static final Duration DEFAULT_LEASE_TTL = Duration.ofSeconds(30);
  /** Keeps a tiny lease TTL from turning into a busy loop of extends. */
  static final Duration MIN_EXTEND_EVERY = Duration.ofMillis(10);

  private enum State { RUNNING, STOPPING, STOPPED }

  final Queue queue;
  final Reconciler reconciler;
  final RunOptions options;
  final Clock clock;
  final ScheduledThreadPoolExecutor loop;
  final ExecutorService pool;
  private final CompletableFuture<Void> done = new CompletableFuture<>();

  // Confined to the stream thread (loop):
  private State state = State.RUNNING;
  /** Reconciles handed to the pool and not yet released, across sessions: never more than concurrency. */
  private int busy;
  private Session current;
  private Duration backoff;
  private ScheduledFuture<?> reconnect;

  /**
   * The keys reconciling in this process (guarded by itself, its monitor also waited on). A lease
   * for a key whose earlier reconcile still runs (its lease lost, its signal ignored, and it has not
   * returned) waits for it: one key never runs twice at once here.
   */
  private final Set<String> reconciling = new HashSet<>();

  Worker(Queue queue, Reconciler reconciler, RunOptions options, Clock clock) {
    this.queue = queue;
    this.reconciler = reconciler;
    this.options = options;
    this.clock = clock;
    this.backoff = options.minBackoff();
    this.loop = new ScheduledThreadPoolExecutor(1, WorkqueueClient.daemonThreads("workqueue-" + queue.name() + "-stream"));
    this.loop.setRemoveOnCancelPolicy(true);
    this.pool = Executors.newFixedThreadPool(options.concurrency(), WorkqueueClient.daemonThreads("workqueue-" + queue.name() + "-reconcile"));
  }

  void start() {
    queue.client().register(this);
    post(this::open);
  }

  /** Begins a graceful stop (idempotent); the future completes when the worker has stopped. */
  public CompletableFuture<Void> stop() {
    post(() -> {
      if (state != State.RUNNING) {
        return;
      }
      state = State.STOPPING;
      if (reconnect != null) {
        reconnect.cancel(false);
      }
      if (current != null && !current.closed()) {
        current.stop();
      } else {
        finish(null);
      }
    });
    return done;
  }

  /** Stops gracefully and waits; throws the worker's failure, if it failed. */
  @Override
  public void close() {
    try {
      stop().join();
    } catch (CompletionException e) {
      throw rethrow(e.getCause());
    }
  }

  /** Waits until the worker has stopped; throws its failure (an unknown queue, say), if it failed. */
  public void await() throws InterruptedException {
    try {
      done.get();
    } catch (ExecutionException e) {
      throw rethrow(e.getCause());
    }
  }

  /** Completes when the worker has stopped; exceptionally with a {@link WorkqueueException} if it failed. */
  public CompletableFuture<Void> done() {
    return done;
  }

  public boolean isRunning() {
    return !done.isDone();
  }

  /**
   * Stops this worker gracefully when the JVM shuts down (SIGTERM, SIGINT): the hook waits for the
   * stop, so results reach the sidecar before the process exits. Returns this worker.
   *
   * <p>java.util.logging resets itself in a shutdown hook of its own, which drops the stop's log
   * lines; while this hook's stop runs, they also go to {@code System.err} once that happened (see
   * the README's Logging).
   */
  public Worker stopOnShutdown() {
    ClientLog.shutdownHookRegistered();
    Runnable stopAndWait = () -> stop().handle((ok, err) -> null).join();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> ClientLog.duringShutdown(stopAndWait), "workqueue-" + queue.name() + "-shutdown"));
    return this;
  }

  // ---- on the stream thread ----

  /** Runs {@code task} on the stream thread; dropped once the worker has stopped. */
  void post(Runnable task) {
    try {
      loop.execute(task);
    } catch (RejectedExecutionException stopped) {
      // The worker has stopped; a late event changes nothing.
    }
  }

  ScheduledFuture<?> schedule(Duration after, Runnable task) {
    try {
      return loop.schedule(task, Math.max(0, after.toNanos()), TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException stopped) {
      return null;
    }
  }

  Instant now() {
    return clock.instant();
  }

  private void open() {
    if (state != State.RUNNING) {
      return;
    }
    Session s = new Session(this, options.concurrency() - busy, options.concurrency());
    current = s;
    s.open();
  }

  /** A slot (a reconcile thread's turn) is taken for a lease that arrived. */
  void acquire() {
    busy++;
  }

  /**
   * A reconcile ended (or never started): its slot is free. A slot freed by an older session's
   * reconcile becomes a credit on the current stream; the session's own come back with its Finish.
   */
  void release(Session from) {
    busy--;
    Session cur = current;
    if (cur != null && cur != from && cur.grantOne()) {
      cur.credit(1);
    }
  }

  /**
   * On a reconcile thread: waits until no other reconcile of {@code key} runs in this process and
   * claims it; false when {@code giveUp} turns true first (the lease was lost, or the worker is
   * stopping, while it waited). Whatever sets what {@code giveUp} reads calls {@link
   * #wakeKeyWaiters()} after.
   */
  boolean claimKey(String key, BooleanSupplier giveUp) {
    boolean logged = false;
    synchronized (reconciling) {
      while (reconciling.contains(key)) {
        if (giveUp.getAsBoolean()) {
          return false;
        }
        if (!logged) {
          LOG.log(Level.INFO, "workqueue: waiting for the earlier reconcile of {0} to return (its lease was lost, and it ignores its cancellation)", key);
          logged = true;
        }
        try {
          reconciling.wait();
        } catch (InterruptedException e) {
          // Nobody interrupts the pool's threads but a reconcile that ran on this one; not meant
          // for this lease (the reconcile thread clears it after each reconcile too).
        }
      }
      reconciling.add(key);
      return true;
    }
  }

  /** Ends {@link #claimKey}'s claim on {@code key}, waking the leases that wait for it. */
  void releaseKey(String key) {
    synchronized (reconciling) {
      reconciling.remove(key);
      reconciling.notifyAll();
    }
  }

  /** A lease was lost or the worker began stopping: leases waiting for their key look again. */
  void wakeKeyWaiters() {
    synchronized (reconciling) {
      reconciling.notifyAll();
    }
  }

  /** A session's stream ended; {@code error} is why (null: the sidecar ended it with OK). */
  void ended(Session s, Throwable error, Instant openedAt) {
    if (current == s) {
      current = null;
    }
    if (state == State.STOPPING) {
      finish(null);
      return;
    }
    if (state == State.STOPPED) {
      return;
    }
    Status.Code code = error == null ? Status.Code.OK : Status.fromThrowable(error).getCode();
    if (permanent(code)) {
      finish(Errors.of(queue.op("work on"), queue.client().target(), error));
      return;
    }
    if (openedAt != null && Duration.between(openedAt, now()).compareTo(options.maxBackoff()) > 0) {
      backoff = options.minBackoff();
    }
    Duration wait = jitter(backoff);
    backoff = min(backoff.multipliedBy(2), options.maxBackoff());
    // Through Errors: a failed TLS handshake says why (the raw status says "io exception").
    String why = error == null ? "the sidecar ended the work stream" : Errors.of(queue.op("work on"), queue.client().target(), error).getMessage();
    LOG.log(Level.WARNING, "workqueue: work stream on queue {0} ended ({1}); reopening in {2} ms", queue.name(), why, wait.toMillis());
    reconnect = schedule(wait, this::open);
  }

  private void finish(WorkqueueException failure) {
    if (state == State.STOPPED) {
      return;
    }
    state = State.STOPPED;
    queue.client().unregister(this);
    pool.shutdown();
    loop.shutdown();
    if (failure == null) {
      LOG.log(Level.INFO, "workqueue: worker of queue {0} stopped", queue.name());
      done.complete(null);
    } else {
      LOG.log(Level.ERROR, "workqueue: worker of queue {0} failed: {1}", queue.name(), failure.getMessage());
      done.completeExceptionally(failure);
    }
  }

  /** Errors that reopening the stream cannot fix. */
  static boolean permanent(Status.Code code) {
    return switch (code) {
      case NOT_FOUND, INVALID_ARGUMENT, UNIMPLEMENTED, PERMISSION_DENIED, UNAUTHENTICATED -> true;
      default -> false;
    };
  }

  /** Spreads {@code d} by ±20%, so workers do not reconnect in lockstep. */
  static Duration jitter(Duration d) {
    return Duration.ofNanos((long) (d.toNanos() * (0.8 + 0.4 * ThreadLocalRandom.current().nextDouble())));
  }

  private static Duration min(Duration a, Duration b) {
    return a.compareTo(b) <= 0 ? a : b;
  }

  private static RuntimeException rethrow(Throwable t) {
    if (t instanceof RuntimeException r) {
      return r;
    }
    return new WorkqueueException(Status.Code.UNKNOWN, String.valueOf(t), ErrorDetails.NONE, t);
  }
}
