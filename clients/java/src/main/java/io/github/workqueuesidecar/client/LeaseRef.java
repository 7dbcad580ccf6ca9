package io.github.workqueuesidecar.client;

import java.util.Objects;

/**
 * Names the lease a write is made under ({@link ObjectWrites#underLease}): the queue, the key and
 * the lease's fencing token, as {@link Request#lease()} gives them. The sidecar makes such a write
 * only while the lease is current, and does not lease the key again until the caches have seen it.
 *
 * @param queue the queue's name
 * @param key the leased key
 * @param token the lease's fencing token (an unsigned 64-bit value)
 */
public record LeaseRef(String queue, String key, long token) {
  public LeaseRef {
    Objects.requireNonNull(queue, "queue");
    Objects.requireNonNull(key, "key");
  }

  workqueue.v1.Object.LeaseRef proto() {
    return workqueue.v1.Object.LeaseRef.newBuilder().setQueue(queue).setKey(key).setToken(token).build();
  }

  @Override
  public String toString() {
    return "LeaseRef[queue=" + queue + ", key=" + key + ", token=" + Long.toUnsignedString(token) + "]";
  }
}
