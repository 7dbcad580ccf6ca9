package io.github.workqueuesidecar.client;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/** A test reconciler: records every call, how many run at once, and delegates to a body. */
final class Recorder implements Reconciler {
  /** What one call saw. */
  record Attempt(Request request, long startNanos, int nth) {}

  /** The test's reconcile body: n is how many earlier attempts the key had. */
  @FunctionalInterface
  interface Body {
    Result reconcile(Request request, CancellationSignal signal, int n) throws Exception;
  }

  private final Body body;
  private final List<Attempt> attempts = new ArrayList<>();
  private final AtomicInteger running = new AtomicInteger();
  private final AtomicInteger most = new AtomicInteger();
  private final AtomicInteger returned = new AtomicInteger();

  Recorder(Body body) {
    this.body = body;
  }

  @Override
  public Result reconcile(Request request, CancellationSignal signal) throws Exception {
    int n;
    synchronized (this) {
      n = (int) attempts.stream().filter(a -> a.request().key().equals(request.key())).count();
      attempts.add(new Attempt(request, System.nanoTime(), n));
    }
    most.accumulateAndGet(running.incrementAndGet(), Math::max);
    try {
      return body.reconcile(request, signal, n);
    } finally {
      running.decrementAndGet();
      returned.incrementAndGet();
    }
  }

  synchronized List<Attempt> all() {
    return List.copyOf(attempts);
  }

  synchronized List<Attempt> of(String key) {
    return attempts.stream().filter(a -> a.request().key().equals(key)).toList();
  }

  synchronized int count() {
    return attempts.size();
  }

  int returned() {
    return returned.get();
  }

  int mostAtOnce() {
    return most.get();
  }

  static List<String> keys(List<Attempt> attempts) {
    List<String> out = new ArrayList<>();
    attempts.forEach(a -> out.add(a.request().key()));
    return out;
  }
}
