package io.github.workqueuesidecar.client;

import io.grpc.StatusRuntimeException;
import java.time.Duration;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import workqueue.v1.WorkQueueServiceGrpc;
import workqueue.v1.Workqueue;

/**
 * One of the sidecar's queues: client-go's workqueue operations, one call each, and {@link #run}/
 * {@link #start} to work on its keys. Cheap; thread-safe. {@link #withPriority} and {@link
 * #withReason} give handles whose adds carry a priority or a reason label.
 */
public final class Queue {
  private final WorkqueueClient client;
  private final String name;
  private final Integer priority;
  private final String reason;

  Queue(WorkqueueClient client, String name, Integer priority, String reason) {
    this.client = client;
    this.name = name;
    this.priority = priority;
    this.reason = reason;
  }

  /** The queue's name. */
  public String name() {
    return name;
  }

  /** A handle whose adds queue keys at {@code priority} (higher is served first). */
  public Queue withPriority(int priority) {
    return new Queue(client, name, priority, reason);
  }

  /** A handle whose adds carry this reason label (shown to workers as the reason's source). */
  public Queue withReason(String reason) {
    return new Queue(client, name, priority, Objects.requireNonNull(reason, "reason"));
  }

  WorkqueueClient client() {
    return client;
  }

  /** Queues keys to be processed now (client-go Add). */
  public void add(String... keys) {
    add(Arrays.asList(keys));
  }

  public void add(Collection<String> keys) {
    Workqueue.AddRequest.Builder req = Workqueue.AddRequest.newBuilder().setQueue(name).addAllKeys(keys).setReason(reason);
    if (priority != null) {
      req.setPriority(priority);
    }
    call("add to", () -> stub().add(req.build()));
  }

  /** Queues keys once {@code delay} has passed (client-go AddAfter); a key already waiting keeps the earlier time. */
  public void addAfter(Duration delay, String... keys) {
    Workqueue.AddAfterRequest.Builder req = Workqueue.AddAfterRequest.newBuilder()
        .setQueue(name)
        .addAllKeys(Arrays.asList(keys))
        .setDelay(Protos.duration(delay))
        .setReason(reason);
    if (priority != null) {
      req.setPriority(priority);
    }
    call("add after a delay to", () -> stub().addAfter(req.build()));
  }

  /** Counts one more failure for each key and queues it after the rate limiter's delay (client-go AddRateLimited). */
  public List<Backoff> addRateLimited(String... keys) {
    Workqueue.AddRateLimitedRequest.Builder req = Workqueue.AddRateLimitedRequest.newBuilder()
        .setQueue(name)
        .addAllKeys(Arrays.asList(keys))
        .setReason(reason);
    if (priority != null) {
      req.setPriority(priority);
    }
    Workqueue.AddRateLimitedResponse resp = call("add rate-limited to", () -> stub().addRateLimited(req.build()));
    return resp.getKeysList().stream().map(k -> new Backoff(k.getKey(), k.getFailures(), Protos.duration(k.getDelay()))).toList();
  }

  /** Clears a key's failure count (client-go Forget). */
  public void forget(String key) {
    call("forget in", () -> stub().forget(Workqueue.ForgetRequest.newBuilder().setQueue(name).setKey(key).build()));
  }

  /** How many times a key has failed since it was last forgotten (client-go NumRequeues). */
  public int numRequeues(String key) {
    return call("count requeues in", () -> stub().numRequeues(Workqueue.NumRequeuesRequest.newBuilder().setQueue(name).setKey(key).build()))
        .getNumRequeues();
  }

  /** The queue's counts (client-go Len is {@code len().ready()}). */
  public Counts len() {
    Workqueue.LenResponse r = call("count keys of", () -> stub().len(Workqueue.LenRequest.newBuilder().setQueue(name).build()));
    Map<Integer, Integer> byPriority = new LinkedHashMap<>();
    r.getReadyByPriorityList().forEach(p -> byPriority.put(p.getPriority(), p.getCount()));
    return new Counts(r.getReady(), r.getWaiting(), r.getHeld(), r.getDirty(), java.util.Collections.unmodifiableMap(byPriority), r.getSettling());
  }

  /** Where a key is: absent, queued, waiting or held, with its failures, last error and reasons. */
  public KeyStatus keyState(String key) {
    return KeyStatus.of(call("look up a key in", () -> stub().keyState(Workqueue.KeyStateRequest.newBuilder().setQueue(name).setKey(key).build())));
  }

  /** Stops the queue handing out keys; the holders of leases are asked to stop (client-go ShutDown). */
  public void shutDown() {
    call("shut down", () -> stub().shutDown(Workqueue.ShutDownRequest.newBuilder().setQueue(name).build()));
  }

  /** Stops the queue and waits up to {@code timeout} for held leases to end (client-go ShutDownWithDrain). */
  public DrainReport shutDownWithDrain(Duration timeout) {
    Workqueue.ShutDownRequest req = Workqueue.ShutDownRequest.newBuilder().setQueue(name).setDrain(true).setDrainTimeout(Protos.duration(timeout)).build();
    Workqueue.ShutDownResponse r = call("shut down with drain", () -> stub(timeout).shutDown(req));
    return new DrainReport(r.getFinished(), r.getReturned());
  }

  /**
   * Works on the queue's keys until stopped: blocks until {@link Worker#stop()} or {@link
   * Worker#close()} is called from elsewhere (a SIGTERM hook, see {@link Worker#stopOnShutdown()}),
   * or this thread is interrupted (which stops gracefully too). Throws only for what retrying cannot
   * fix: an unknown queue ({@link NotFoundException}), a refused request ({@link
   * InvalidArgumentException}).
   */
  public void run(Reconciler reconciler, RunOptions options) {
    Worker worker = start(reconciler, options);
    try {
      worker.await();
    } catch (InterruptedException e) {
      worker.close();
      Thread.currentThread().interrupt();
    }
  }

  /** Starts working on the queue's keys in the background; close the returned worker to stop gracefully. */
  public Worker start(Reconciler reconciler, RunOptions options) {
    Worker worker = new Worker(this, Objects.requireNonNull(reconciler, "reconciler"), Objects.requireNonNull(options, "options"), java.time.Clock.systemUTC());
    worker.start();
    return worker;
  }

  String op(String verb) {
    return verb + " queue " + name;
  }

  private WorkQueueServiceGrpc.WorkQueueServiceBlockingStub stub() {
    return stub(Duration.ZERO);
  }

  private WorkQueueServiceGrpc.WorkQueueServiceBlockingStub stub(Duration extra) {
    return client.queueStub.withDeadlineAfter(client.options().callTimeout().plus(extra).toMillis(), TimeUnit.MILLISECONDS);
  }

  private <T> T call(String verb, Supplier<T> rpc) {
    try {
      return rpc.get();
    } catch (StatusRuntimeException e) {
      throw Errors.of(op(verb), client.target(), e);
    }
  }
}
