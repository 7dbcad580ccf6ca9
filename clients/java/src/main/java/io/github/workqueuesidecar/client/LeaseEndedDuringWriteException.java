package io.github.workqueuesidecar.client;

/**
 * ABORTED with reason {@code LEASE_ENDED_DURING_WRITE} (domain {@code workqueue-sidecar}): an
 * ObjectService write under a lease ({@link ObjectWrites#underLease}) was made, but the lease ended
 * before the API server answered it: the sidecar's term as leader or shard owner ended, a shutdown
 * handed the lease back, or the worker's own Done/Finish ended it. Another worker may hold the key
 * by now. A {@link ConflictException} too, but not one to read again and retry: treat it like a
 * lost lease, and do not Done/Finish the lease expecting success.
 */
public class LeaseEndedDuringWriteException extends ConflictException {
  private static final long serialVersionUID = 1L;

  public LeaseEndedDuringWriteException(String message) {
    this(message, new ErrorDetails(ErrorDetails.LEASE_ENDED_DURING_WRITE, ErrorDetails.DOMAIN_SIDECAR, java.util.Map.of(), java.util.List.of()), null);
  }

  public LeaseEndedDuringWriteException(String message, ErrorDetails details, Throwable cause) {
    super(message, details, cause);
  }
}
