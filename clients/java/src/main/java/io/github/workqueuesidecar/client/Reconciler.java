package io.github.workqueuesidecar.client;

/**
 * Reconciles one key. Return {@link Result#done()} or {@link Result#requeueAfter}; throw to have the
 * key retried with the queue's backoff (the exception's message becomes the key's last error).
 *
 * <p>Called on one of the worker's {@code concurrency} threads, never twice at once for one key.
 * {@code signal} fires when the lease is lost or the sidecar asks to stop.
 */
@FunctionalInterface
public interface Reconciler {
  Result reconcile(Request request, CancellationSignal signal) throws Exception;
}
