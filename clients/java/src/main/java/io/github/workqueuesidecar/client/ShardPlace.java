package io.github.workqueuesidecar.client;

import java.util.OptionalInt;
import workqueue.v1.Workqueue;

/**
 * Which shard slot a key of a sharded queue falls in and which replica owns it, as the asked sidecar
 * last read its shard group's Leases ({@link KeyStatus#shard()}).
 *
 * @param slot the key's shard slot, 0 to 4095; empty when not known (sharded by uid, the key's
 *     object is not in the sidecar's cache nor among its tombstones; such a key is not granted
 *     until it is)
 * @param owner the identity of the replica the slot is assigned to; empty when the slot is not
 *     known or no replica is live. During a handover the previous owner may still be draining it
 * @param grantedHere whether the asked sidecar holds the slot and grants the key now
 */
public record ShardPlace(OptionalInt slot, String owner, boolean grantedHere) {

  static ShardPlace of(Workqueue.ShardPlace p) {
    return new ShardPlace(p.hasSlot() ? OptionalInt.of(p.getSlot()) : OptionalInt.empty(), p.getOwner(), p.getGrantedHere());
  }
}
