package io.github.workqueuesidecar.client;

import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import workqueue.v1.Workqueue;
import workqueue.v1.Workqueue.WorkRequest;
import workqueue.v1.Workqueue.WorkResponse;

/**
 * One Work stream, from Open to its end: its leases, their timers, and every message both ways.
 * Confined to the worker's stream thread: gRPC's callbacks and the reconcile threads post to it, and
 * it alone sends (a StreamObserver allows one sender).
 */
final class Session {
  private static final ClientLog LOG = ClientLog.of(Session.class);

  private enum Phase { OPENING, OPEN, STOPPING, CLOSED }

  private final Worker w;
  private ClientCallStreamObserver<WorkRequest> requests;
  private Phase phase = Phase.OPENING;
  /** The stop began: leases not started stay unstarted (read by reconcile threads). */
  private volatile boolean stopping;
  /** Half-closed: nothing more is sent. */
  private boolean halfClosed;
  private Instant openedAt;
  private Duration ttl = Worker.DEFAULT_LEASE_TTL;
  private Duration extendEvery = Worker.DEFAULT_LEASE_TTL.dividedBy(3);
  /** Credits granted so far and their ceiling. */
  private int window;
  private int maxWindow;
  private final Map<Long, HeldLease> leases = new HashMap<>();
  /** Tokens of lost leases whose Finish was sent: the sidecar's refusal is expected. */
  private final LostFinishes lostFinishes = new LostFinishes();
  /** Drops the lost leases' Finishes left unanswered (see LostFinishes); one per stream. */
  private ScheduledFuture<?> forgetTimer;
  private ScheduledFuture<?> openTimer;
  private ScheduledFuture<?> stopTimer;
  private ScheduledFuture<?> closeTimer;

  Session(Worker worker, int window, int maxWindow) {
    this.w = worker;
    this.window = Math.max(0, window);
    this.maxWindow = maxWindow;
  }

  boolean closed() {
    return phase == Phase.CLOSED;
  }

  boolean isStopping() {
    return stopping;
  }

  /** Starts the call and sends Open with the free slots as the window. */
  void open() {
    requests = (ClientCallStreamObserver<WorkRequest>) w.queue.client().queueAsync.work(new ClientResponseObserver<WorkRequest, WorkResponse>() {
      @Override
      public void beforeStart(ClientCallStreamObserver<WorkRequest> stream) {}

      @Override
      public void onNext(WorkResponse msg) {
        w.post(() -> onMessage(msg));
      }

      @Override
      public void onError(Throwable t) {
        w.post(() -> onEnd(t));
      }

      @Override
      public void onCompleted() {
        w.post(() -> onEnd(null));
      }
    });
    WorkRequest.Open.Builder open = WorkRequest.Open.newBuilder()
        .setQueue(w.queue.name())
        .setWorker(w.queue.client().options().workerName())
        .setCredits(window)
        .setIncludeObject(w.options.objectIncluded())
        // Nothing waits on a Finish's answer: a refusal is only logged (onFinishAck). So the
        // sidecar answers only those, one message less per lease; a sidecar older than the field
        // answers them all.
        .setAckFailuresOnly(true);
    if (w.options.leaseTtl() != null) {
      open.setLeaseTtl(Protos.duration(w.options.leaseTtl()));
    }
    send(WorkRequest.newBuilder().setOpen(open).build());
    openTimer = w.schedule(Worker.OPEN_TIMEOUT, () -> {
      if (phase == Phase.OPENING) {
        requests.cancel("the sidecar did not answer Open within " + Worker.OPEN_TIMEOUT, null);
      }
    });
  }

  private void onMessage(WorkResponse msg) {
    if (phase == Phase.CLOSED) {
      return;
    }
    switch (msg.getKindCase()) {
      case OPENED -> onOpened(msg.getOpened());
      case LEASE -> onLease(msg.getLease());
      case EXTENDED -> onExtended(msg.getExtended());
      case FINISH_ACK -> onFinishAck(msg.getFinishAck());
      case CANCEL -> onCancel(msg.getCancel());
      default -> LOG.log(Level.DEBUG, "workqueue: unknown message on the work stream: {0}", msg.getKindCase());
    }
  }

  private void onOpened(WorkResponse.Opened opened) {
    cancel(openTimer);
    openedAt = w.now();
    if (phase == Phase.OPENING) {
      phase = Phase.OPEN;
    }
    Duration given = Protos.duration(opened.getLeaseTtl());
    if (!given.isZero() && !given.isNegative()) {
      ttl = given;
    }
    extendEvery = ttl.dividedBy(3).compareTo(Worker.MIN_EXTEND_EVERY) < 0 ? Worker.MIN_EXTEND_EVERY : ttl.dividedBy(3);
    // An applied Finish is not answered: a lost lease the sidecar still held gets no answer, so its
    // token is dropped a TTL after its Finish went out (a refusal comes within a round trip). A
    // sidecar older than the field says false and answers every Finish, as before.
    lostFinishes.forgetAfter(opened.getAckFailuresOnly() ? ttl : null);
    int limit = opened.getMaxCredits();
    if (limit > 0 && limit < maxWindow) {
      LOG.log(Level.WARNING, "workqueue: concurrency {0} is over the sidecar''s window {1}; capped", maxWindow, limit);
      maxWindow = limit;
      window = Math.min(window, limit);
    }
    LOG.log(Level.INFO, "workqueue: work stream on queue {0} open (credits {1}, lease ttl {2}, {3})", w.queue.name(), opened.getCredits(), ttl,
        opened.getAckFailuresOnly() ? "only failed finishes answered" : "every finish answered");
  }

  private void onLease(Workqueue.Lease l) {
    Instant received = w.now();
    if (stopping) {
      LOG.log(Level.DEBUG, "workqueue: lease of {0} arrived while stopping; it goes back when the stream closes", l.getKey());
      return;
    }
    Duration leaseTtl = l.hasTtl() ? Protos.duration(l.getTtl()) : ttl;
    if (leaseTtl.isZero() || leaseTtl.isNegative()) {
      leaseTtl = ttl;
    }
    HeldLease h = new HeldLease(l.getKey(), l.getToken(), this, received, Protos.instant(l.hasDeadline(), l.getDeadline()), leaseTtl);
    leases.put(h.token, h);
    scheduleExpiry(h);
    h.extender = scheduleExtends(h);
    w.acquire();
    Request request = Request.of(w.queue.name(), l, h.signal, w.queue.client().options().objectMapper());
    try {
      w.pool.execute(() -> reconcile(h, request));
    } catch (java.util.concurrent.RejectedExecutionException e) {
      notStarted(h);
    }
  }

  private ScheduledFuture<?> scheduleExtends(HeldLease h) {
    try {
      long every = extendEvery.toNanos();
      return w.loop.scheduleAtFixedRate(() -> extend(h), every, every, TimeUnit.NANOSECONDS);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      return null;
    }
  }

  private void scheduleExpiry(HeldLease h) {
    cancel(h.expiry);
    h.expiry = w.schedule(Duration.between(w.now(), h.deadline()), () -> {
      if (!h.lost() && h.expired(w.now())) {
        LOG.log(Level.WARNING, "workqueue: lease of {0} passed its deadline unextended; cancelling its reconcile", h.key);
        h.lose("the lease's deadline passed");
        cancel(h.extender);
      } else if (!h.lost()) {
        scheduleExpiry(h); // the clock ran behind the timer
      }
    });
  }

  /**
   * On a reconcile thread: run the reconciler unless the lease may no longer start. An earlier
   * reconcile of the key may still run here (its lease lost, its signal ignored): the lease waits
   * for it first, on this thread, keeping its slot, so that one key never runs twice at once in
   * this process; lost (or the worker stopping) while it waits, it is never started.
   */
  private void reconcile(HeldLease h, Request request) {
    if (!w.claimKey(h.key, () -> stopping || h.lost())) {
      if (h.lost()) {
        LOG.log(Level.INFO, "workqueue: lease of {0} lost while it waited for the earlier reconcile of its key; not reconciled", h.key);
      }
      w.post(() -> notStarted(h));
      return;
    }
    if (stopping || !h.mayStart(w.now())) {
      w.releaseKey(h.key);
      w.post(() -> notStarted(h));
      return;
    }
    Result result = null;
    Throwable error = null;
    try {
      result = w.reconciler.reconcile(request, h.signal);
      if (result == null) {
        error = new IllegalStateException("the reconciler returned null, not a Result");
      }
    } catch (Throwable t) {
      error = t;
    } finally {
      Thread.interrupted(); // an interrupt meant for this reconcile must not reach the next
      w.releaseKey(h.key);
    }
    Result r = result;
    Throwable e = error;
    w.post(() -> finished(h, r, e));
  }

  /** A lease of this session was lost (on any thread): one waiting for its key gives up. */
  void leaseLost() {
    w.wakeKeyWaiters();
  }

  /** A lease that never ran: past its deadline, lost, or the stop began first. */
  private void notStarted(HeldLease h) {
    leases.remove(h.token);
    h.cancelTimers();
    w.release(this);
    if (!h.lost() && !h.expired(w.now()) && stopping) {
      maybeHalfClose(); // still ours: it goes back when the stream closes
      return;
    }
    if (!h.lost()) {
      LOG.log(Level.WARNING, "workqueue: lease of {0} expired before its reconcile could start; not reconciled", h.key);
      h.lose("the lease expired before its reconcile started");
    }
    finishLost(h);
    maybeHalfClose();
  }

  private void finished(HeldLease h, Result result, Throwable error) {
    leases.remove(h.token);
    h.cancelTimers();
    w.release(this);
    if (!h.lost() && endedDuringWrite(error)) {
      // A write under the lease was made, but the sidecar ended the lease before the API server
      // answered (its Cancel may not be here yet): the lease is lost. Its outcome is not sent (the
      // sidecar would refuse it as stale, a warning); the lost lease's Finish is.
      LOG.log(Level.WARNING, "workqueue: lease of {0} in queue {1} lost: lease ended during write; result discarded", h.key, w.queue.name());
      h.lose("lease ended during write");
    }
    if (!h.resultCounts(w.now())) {
      if (!h.lost()) {
        // Returned after the deadline, before the expiry timer saw it pass: lost here, and
        // logged here, as every loss is, once.
        LOG.log(Level.WARNING, "workqueue: lease of {0} in queue {1} lost: its deadline passed before its reconcile returned; result discarded", h.key, w.queue.name());
        h.lose("the reconcile returned after the lease's deadline");
      }
      // DEBUG: the loss was a WARNING when it happened; this is the same lease again.
      LOG.log(Level.DEBUG, "workqueue: reconcile of {0} returned after its lease was lost; result discarded", h.key);
      finishLost(h);
    } else {
      WorkRequest.Finish.Builder finish = WorkRequest.Finish.newBuilder().setKey(h.key).setToken(h.token);
      if (error != null) {
        String text = error.getMessage() == null ? error.toString() : error.getMessage();
        LOG.log(Level.WARNING, "workqueue: reconcile of " + h.key + " failed; retried with backoff: " + text, error);
        finish.setRetry(Workqueue.Retry.newBuilder().setError(text));
      } else if (result.requeueAfter().isPresent()) {
        finish.setRequeueAfter(Workqueue.RequeueAfter.newBuilder().setDelay(Protos.duration(result.requeueAfter().get())));
      } else {
        finish.setSuccess(Workqueue.Success.getDefaultInstance());
      }
      send(WorkRequest.newBuilder().setFinish(finish).build());
    }
    maybeHalfClose();
  }

  /** Whether a reconcile's error is a LeaseEndedDuringWriteException, or has one among its causes. */
  private static boolean endedDuringWrite(Throwable error) {
    java.util.Set<Throwable> seen = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
    for (Throwable t = error; t != null && seen.add(t); t = t.getCause()) {
      if (t instanceof LeaseEndedDuringWriteException) {
        return true;
      }
    }
    return false;
  }

  /**
   * Answers a lease that ended without this worker with a Finish all the same: the sidecar refuses
   * it (FAILED_PRECONDITION, nothing changes) and gives the credit back.
   */
  private void finishLost(HeldLease h) {
    WorkRequest.Finish finish = WorkRequest.Finish.newBuilder()
        .setKey(h.key)
        .setToken(h.token)
        .setRetry(Workqueue.Retry.newBuilder().setError("lease lost before the worker finished"))
        .build();
    if (send(WorkRequest.newBuilder().setFinish(finish).build())) {
      lostFinishes.add(h.token, w.now());
      forgetUnanswered();
    }
  }

  /** Arms the one timer that drops lost leases' Finishes left unanswered a TTL, if one is due. */
  private void forgetUnanswered() {
    if (forgetTimer != null || phase == Phase.CLOSED) {
      return;
    }
    lostFinishes.nextExpiry().ifPresent(at -> forgetTimer = w.schedule(Duration.between(w.now(), at), () -> {
      forgetTimer = null;
      lostFinishes.prune(w.now());
      forgetUnanswered();
    }));
  }

  private void extend(HeldLease h) {
    if (h.lost() || phase == Phase.CLOSED) {
      cancel(h.extender);
      return;
    }
    if (h.expired(w.now())) {
      LOG.log(Level.WARNING, "workqueue: lease of {0} expired without an answer from the sidecar; cancelling its reconcile", h.key);
      h.lose("the lease's deadline passed");
      cancel(h.extender);
      return;
    }
    send(WorkRequest.newBuilder().setExtend(WorkRequest.Extend.newBuilder().setKey(h.key).setToken(h.token)).build());
  }

  private void onExtended(WorkResponse.Extended e) {
    HeldLease h = leases.get(e.getToken());
    if (h == null || h.lost()) {
      return;
    }
    Status.Code code = Status.fromCodeValue(e.getCode()).getCode();
    switch (code) {
      case OK -> {
        h.extended(w.now(), Protos.instant(e.hasDeadline(), e.getDeadline()), e.hasTtl() ? Protos.duration(e.getTtl()) : null);
        scheduleExpiry(h);
        if (e.getCancel()) {
          // DEBUG, as a Cancel's: see onCancel.
          LOG.log(Level.DEBUG, "workqueue: the sidecar asks to stop working on {0}", h.key);
          h.signal.cancel(CancellationSignal.Cause.STOP_REQUESTED, "the sidecar asks to stop");
        }
      }
      case FAILED_PRECONDITION -> {
        LOG.log(Level.WARNING, "workqueue: lease of {0} lost: the sidecar no longer knows it; cancelling its reconcile", h.key);
        h.lose("the sidecar no longer knows the lease: " + e.getMessage());
        cancel(h.extender);
      }
      default -> LOG.log(Level.WARNING, "workqueue: extending the lease of {0} failed: {1}: {2}", h.key, code, e.getMessage());
    }
  }

  private void onFinishAck(WorkResponse.FinishAck a) {
    if (lostFinishes.answered(a.getToken()) || a.getCode() == 0) {
      return;
    }
    LOG.log(Level.WARNING, "workqueue: the sidecar refused the finish of {0}: {1}: {2}", a.getKey(), Status.fromCodeValue(a.getCode()).getCode(), a.getMessage());
  }

  private void onCancel(WorkResponse.Cancel c) {
    HeldLease h = leases.get(c.getToken());
    if (h == null || h.lost()) {
      return; // a loss is logged once, when it happens
    }
    if (c.getRevoked()) {
      LOG.log(Level.WARNING, "workqueue: lease of {0} lost: the sidecar revoked it ({1}); cancelling its reconcile", h.key, c.getMessage());
      h.lose("revoked by the sidecar: " + c.getMessage());
      cancel(h.extender);
    } else {
      // The lease stays valid and nothing went wrong, so DEBUG: the sidecar
      // asks back every lease at once when it stops, or those of every shard
      // slot that moved to another replica (up to 4,096), one Cancel each.
      LOG.log(Level.DEBUG, "workqueue: the sidecar asks to stop working on {0}: {1}", h.key, c.getMessage());
      h.signal.cancel(CancellationSignal.Cause.STOP_REQUESTED, "the sidecar asks to stop: " + c.getMessage());
    }
  }

  /** Takes one more credit for a slot freed elsewhere, if the window has room. */
  boolean grantOne() {
    if (phase == Phase.CLOSED || stopping || window >= maxWindow) {
      return false;
    }
    window++;
    return true;
  }

  void credit(int n) {
    send(WorkRequest.newBuilder().setCredit(WorkRequest.Credit.newBuilder().setCredits(n)).build());
  }

  /** The graceful stop: start nothing new; half-close once every started lease is finished (or the stop timeout passes). */
  void stop() {
    stopping = true;
    w.wakeKeyWaiters(); // a lease waiting for its key is never started
    phase = Phase.STOPPING;
    LOG.log(Level.INFO, "workqueue: stopping work on queue {0}: no new keys; waiting for {1} reconciles", w.queue.name(), leases.size());
    stopTimer = w.schedule(w.options.stopTimeout(), () -> {
      if (phase != Phase.STOPPING || halfClosed) {
        return;
      }
      LOG.log(Level.WARNING, "workqueue: stop timeout: cancelling {0} running reconciles; their keys go back to the queue", leases.size());
      for (HeldLease h : new ArrayList<>(leases.values())) {
        h.lose("the worker's stop timeout passed");
        h.cancelTimers();
      }
      halfClose();
    });
    maybeHalfClose();
  }

  private void maybeHalfClose() {
    if (phase == Phase.STOPPING && !halfClosed && leases.isEmpty()) {
      halfClose();
    }
  }

  private void halfClose() {
    cancel(stopTimer);
    halfClosed = true;
    try {
      requests.onCompleted();
    } catch (RuntimeException e) {
      LOG.log(Level.DEBUG, "workqueue: half-close failed", e);
    }
    closeTimer = w.schedule(Worker.CLOSE_TIMEOUT, () -> {
      if (phase != Phase.CLOSED) {
        LOG.log(Level.WARNING, "workqueue: the sidecar did not end the work stream within {0} of the worker closing it", Worker.CLOSE_TIMEOUT);
        requests.cancel("the sidecar did not end the stream", null);
      }
    });
  }

  /** The stream ended: with an error, or OK after the worker's half-close (or the sidecar's own end). */
  private void onEnd(Throwable error) {
    if (phase == Phase.CLOSED) {
      return;
    }
    boolean wasStopping = phase == Phase.STOPPING;
    phase = Phase.CLOSED;
    cancel(openTimer);
    cancel(stopTimer);
    cancel(closeTimer);
    cancel(forgetTimer);
    int n = 0;
    for (HeldLease h : leases.values()) {
      if (!h.lost()) {
        h.lose(error == null ? "the work stream ended" : "the work stream broke: " + error.getMessage());
        n++;
      }
      h.cancelTimers();
    }
    if (n > 0 && !wasStopping) {
      LOG.log(Level.WARNING, "workqueue: work stream broke; {0} leases returned to the queue, their reconciles cancelled", n);
    }
    w.ended(this, error, openedAt);
  }

  /** Sends one message unless the stream is closed or half-closed; false if not sent. */
  private boolean send(WorkRequest req) {
    if (phase == Phase.CLOSED || halfClosed) {
      return false;
    }
    try {
      requests.onNext(req);
      return true;
    } catch (RuntimeException e) {
      LOG.log(Level.DEBUG, "workqueue: send on the work stream failed", e);
      return false;
    }
  }

  private static void cancel(ScheduledFuture<?> f) {
    if (f != null) {
      f.cancel(false);
    }
  }
}
