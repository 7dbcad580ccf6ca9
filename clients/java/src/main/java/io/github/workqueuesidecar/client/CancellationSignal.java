package io.github.workqueuesidecar.client;

import java.lang.System.Logger.Level;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * Tells a running reconcile to stop: its lease was lost ({@link Cause#LEASE_LOST}: it expired, the
 * sidecar revoked it, the stream broke; the result will be discarded and the key is already back in
 * the queue) or the sidecar asks to stop ({@link Cause#STOP_REQUESTED}: the queue is shutting down;
 * the lease still holds, so return soon and the result counts).
 *
 * <p>Poll {@link #isCancelled()}, or register a callback with {@link #onCancel(Runnable)} (for
 * example to interrupt the reconcile's thread or abort an HTTP call). Callbacks run on the worker's
 * stream thread: keep them short and never block in them.
 */
public final class CancellationSignal {
  private static final ClientLog LOG = ClientLog.of(CancellationSignal.class);

  /** Why a reconcile is asked to stop. */
  public enum Cause {
    /** The lease ended without this worker: expired, revoked, or its stream broke. */
    LEASE_LOST,
    /** The sidecar asks the worker to stop (the queue shuts down); the lease is still valid. */
    STOP_REQUESTED
  }

  private final Object lock = new Object();
  private final Supplier<Instant> deadline;
  private Cause cause; // guarded by lock
  private String message = ""; // guarded by lock
  private List<Runnable> callbacks = new ArrayList<>(); // guarded by lock; null once fired

  CancellationSignal(Supplier<Instant> deadline) {
    this.deadline = deadline;
  }

  /** A signal that never fires, with no deadline: for calling a reconciler in a unit test. */
  public static CancellationSignal never() {
    return new CancellationSignal(() -> Instant.MAX);
  }

  /**
   * The cause as of now: a lease whose deadline has passed by the clock is lost, even before the
   * worker's timer fires (after the process was stopped and resumed, timers fire in any order).
   */
  private Cause causeNow() {
    synchronized (lock) {
      if (cause != Cause.LEASE_LOST && !Instant.now().isBefore(deadline.get())) {
        return Cause.LEASE_LOST;
      }
      return cause;
    }
  }

  /** True once the reconcile is asked to stop, for either cause, or its lease's deadline has passed. */
  public boolean isCancelled() {
    return causeNow() != null;
  }

  /**
   * True once the lease is lost, or its deadline has passed by the clock (read when asked): whatever
   * the reconcile returns now is discarded.
   */
  public boolean isLeaseLost() {
    return causeNow() == Cause.LEASE_LOST;
  }

  /** Why the reconcile is asked to stop; empty while it is not. A lost lease overrides a stop request. */
  public Optional<Cause> cause() {
    return Optional.ofNullable(causeNow());
  }

  /** A text for logs saying what happened ("lease deadline passed", "stream broke", ...); empty while not cancelled. */
  public String message() {
    synchronized (lock) {
      if (cause != Cause.LEASE_LOST && causeNow() == Cause.LEASE_LOST) {
        return "lease deadline passed";
      }
      return message;
    }
  }

  /**
   * The lease's current deadline (moved by every extend): past it another worker may hold the key,
   * so check it before committing a side effect late in a long reconcile.
   */
  public Instant deadline() {
    return deadline.get();
  }

  /** Throws {@link CancelledException} if the reconcile is asked to stop. */
  public void throwIfCancelled() {
    Cause now = causeNow();
    if (now != null) {
      throw new CancelledException(now, message());
    }
  }

  /**
   * Runs {@code callback} once when the signal fires (at once, on this thread, if it already has).
   * Closing the returned registration removes the callback.
   */
  public Registration onCancel(Runnable callback) {
    synchronized (lock) {
      if (callbacks != null) {
        callbacks.add(callback);
        return () -> {
          synchronized (lock) {
            if (callbacks != null) {
              callbacks.remove(callback);
            }
          }
        };
      }
    }
    run(callback);
    return () -> {};
  }

  /** Fires the signal; a lost lease overrides an earlier stop request. Callbacks run once, on the first cause. */
  void cancel(Cause why, String text) {
    List<Runnable> fire;
    synchronized (lock) {
      if (cause == Cause.LEASE_LOST || cause == why) {
        return;
      }
      cause = why;
      message = text;
      fire = callbacks;
      callbacks = null;
    }
    if (fire != null) {
      fire.forEach(CancellationSignal::run);
    }
  }

  private static void run(Runnable callback) {
    try {
      callback.run();
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, "a cancellation callback threw", e);
    }
  }

  /** A registered callback; {@link #close()} removes it. */
  @FunctionalInterface
  public interface Registration extends AutoCloseable {
    @Override
    void close();
  }

  /** Thrown by {@link #throwIfCancelled()}: a reconcile stopped because it was asked to. */
  public static final class CancelledException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final transient Cause cause;

    CancelledException(Cause cause, String message) {
      super("cancelled (" + cause + "): " + message);
      this.cause = cause;
    }

    /** Why the reconcile was asked to stop. */
    public Cause why() {
      return cause;
    }
  }
}
