package io.github.workqueuesidecar.client;

import java.time.Duration;
import java.time.Instant;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * Tokens of lost leases whose Finish was sent, with when it was sent: the sidecar's refusal of them
 * is expected, not worth a warning, and answering one removes it. On a stream that hears only of
 * failed Finishes ({@code Opened.ack_failures_only}), a lost lease the sidecar still held (the local
 * deadline passed first) has its Finish applied and never answered: then {@link #forgetAfter} is set
 * and {@link #prune} drops a token that long after its Finish went out. While it is null (a sidecar
 * that answers every Finish) a token stays until its answer, as every Finish gets one. Confined to
 * the stream thread, as its Session.
 */
final class LostFinishes {
  /** When each Finish went out, in sending order: the oldest first. */
  private final Map<Long, Instant> sent = new LinkedHashMap<>();
  /** How long an unanswered token is kept; null keeps it until answered. */
  private Duration forgetAfter;

  void forgetAfter(Duration after) {
    forgetAfter = after;
  }

  Duration forgetAfter() {
    return forgetAfter;
  }

  void add(long token, Instant now) {
    sent.remove(token); // keeps the map in sending order
    sent.put(token, now);
  }

  /** Removes {@code token}; true if it was a lost lease's Finish (its refusal was expected). */
  boolean answered(long token) {
    return sent.remove(token) != null;
  }

  /** Drops the tokens whose Finish went out {@code forgetAfter} ago or more. */
  void prune(Instant now) {
    if (forgetAfter == null) {
      return;
    }
    for (Iterator<Instant> it = sent.values().iterator(); it.hasNext(); ) {
      if (now.isBefore(it.next().plus(forgetAfter))) {
        return;
      }
      it.remove();
    }
  }

  /** When the oldest token is to be dropped; empty when none will be. */
  Optional<Instant> nextExpiry() {
    if (forgetAfter == null || sent.isEmpty()) {
      return Optional.empty();
    }
    return Optional.of(sent.values().iterator().next().plus(forgetAfter));
  }

  boolean contains(long token) {
    return sent.containsKey(token);
  }

  int size() {
    return sent.size();
  }
}
