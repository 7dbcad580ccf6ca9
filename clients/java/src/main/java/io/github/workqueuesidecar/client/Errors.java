package io.github.workqueuesidecar.client;

import com.google.rpc.ErrorInfo;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;

/** Turns gRPC statuses into the client's exceptions: the one place that maps codes. */
final class Errors {
  private Errors() {}

  /** The exception for a failed call; {@code op} says what was attempted, e.g. "add to queue x". */
  static WorkqueueException of(String op, Throwable t) {
    if (t instanceof WorkqueueException w) {
      return w;
    }
    Status status = Status.fromThrowable(t);
    String reason = null;
    if (t instanceof StatusRuntimeException sre) {
      reason = reasonOf(sre);
    }
    return of(status.getCode(), op, status.getDescription(), reason, t);
  }

  /** The exception for a code that came inside a message (FinishAck, Extended). */
  static WorkqueueException of(Status.Code code, String op, String description, String reason, Throwable cause) {
    String message = "workqueue: " + op + ": " + code + (description == null || description.isEmpty() ? "" : ": " + description);
    return switch (code) {
      case NOT_FOUND -> new NotFoundException(message, reason, cause);
      case INVALID_ARGUMENT -> new InvalidArgumentException(message, reason, cause);
      case FAILED_PRECONDITION -> new StaleLeaseException(message, reason, cause);
      case UNAVAILABLE -> new UnavailableException(message, reason, cause);
      case ABORTED -> new ConflictException(message, reason, cause);
      case RESOURCE_EXHAUSTED -> new ResourceExhaustedException(message, reason, cause);
      case DEADLINE_EXCEEDED -> new DeadlineExceededException(message, reason, cause);
      default -> new WorkqueueException(code, message, reason, cause);
    };
  }

  private static String reasonOf(StatusRuntimeException e) {
    com.google.rpc.Status proto = StatusProto.fromThrowable(e);
    if (proto == null) {
      return null;
    }
    for (com.google.protobuf.Any detail : proto.getDetailsList()) {
      if (detail.is(ErrorInfo.class)) {
        try {
          return detail.unpack(ErrorInfo.class).getReason();
        } catch (com.google.protobuf.InvalidProtocolBufferException ignored) {
          return null;
        }
      }
    }
    return null;
  }
}
