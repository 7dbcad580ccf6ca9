package io.github.workqueuesidecar.client;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.BadRequest;
import com.google.rpc.ErrorInfo;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import javax.net.ssl.SSLException;

/** Turns gRPC statuses into the client's exceptions: the one place that maps codes. */
final class Errors {
  private Errors() {}

  /**
   * The exception for a failed call; {@code op} says what was attempted, e.g. "add to queue x", and
   * {@code target} is the sidecar's address, named when it cannot be reached.
   */
  static WorkqueueException of(String op, String target, Throwable t) {
    if (t instanceof WorkqueueException w) {
      return w;
    }
    Status status = Status.fromThrowable(t);
    SSLException tls = sslCause(t);
    if (status.getCode() == Status.Code.UNAVAILABLE && tls != null) {
      String message = "workqueue: " + op + ": UNAVAILABLE: TLS handshake with the sidecar failed: " + tls.getMessage();
      return new TlsHandshakeException(message, detailsOf(t), t);
    }
    if (status.getCode() == Status.Code.UNAVAILABLE && status.getCause() != null) {
      // The transport failed before the sidecar saw the call: grpc-java says only "io exception"
      // and keeps the why (connection refused, no such socket file) in the cause.
      String message = "workqueue: " + op + ": UNAVAILABLE: no connection to the sidecar at " + target + ": " + causeText(status.getCause());
      return new UnavailableException(message, detailsOf(t), t);
    }
    return of(status.getCode(), op, status.getDescription(), detailsOf(t), t);
  }

  /** What a transport failure says, innermost cause first ("Connection refused"), each message once. */
  static String causeText(Throwable cause) {
    List<String> messages = new ArrayList<>();
    for (Throwable c = cause; c != null; c = c.getCause() == c ? null : c.getCause()) {
      String m = c.getMessage() != null ? c.getMessage()
          // netty's epoll transport says a unix socket's file is missing with no message
          : c instanceof java.io.FileNotFoundException ? "no such file (FileNotFoundException)"
          : c.getClass().getSimpleName();
      if (messages.stream().noneMatch(seen -> seen.contains(m))) {
        messages.add(0, m);
      }
    }
    return String.join(": ", messages);
  }

  /** The TLS error that made the transport fail, if one did. */
  private static SSLException sslCause(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (c instanceof SSLException ssl) {
        return ssl;
      }
    }
    return null;
  }

  /** The exception for a code that came inside a message (FinishAck, Extended). */
  static WorkqueueException of(Status.Code code, String op, String description, String reason, Throwable cause) {
    return of(code, op, description, ErrorDetails.ofReason(reason), cause);
  }

  static WorkqueueException of(Status.Code code, String op, String description, ErrorDetails details, Throwable cause) {
    String message = "workqueue: " + op + ": " + code + (description == null || description.isEmpty() ? "" : ": " + description);
    return switch (code) {
      case NOT_FOUND -> new NotFoundException(message, details, cause);
      // OUT_OF_RANGE: a message past the sidecar's size limit (a write body over 3 MiB).
      case INVALID_ARGUMENT, OUT_OF_RANGE -> new InvalidArgumentException(code, message, details, cause);
      case FAILED_PRECONDITION -> ErrorDetails.NO_KUBERNETES.equals(details.reason())
          ? new NoKubernetesException(message, details, cause)
          : new StaleLeaseException(message, details, cause);
      case UNAVAILABLE -> new UnavailableException(message, details, cause);
      // The API server's conflicts (409) share the code; the sidecar's reason tells a write whose
      // lease ended before its answer.
      case ABORTED -> switch (Objects.requireNonNullElse(details.reason(), "")) {
        case ErrorDetails.LEASE_ENDED_DURING_WRITE -> new LeaseEndedDuringWriteException(message, details, cause);
        case ErrorDetails.ALREADY_EXISTS -> new AlreadyExistsException(message, details, cause);
        default -> new ConflictException(message, details, cause);
      };
      case PERMISSION_DENIED -> new PermissionDeniedException(message, details, cause);
      case RESOURCE_EXHAUSTED -> new ResourceExhaustedException(message, details, cause);
      case DEADLINE_EXCEEDED -> new DeadlineExceededException(message, details, cause);
      default -> new WorkqueueException(code, message, details, cause);
    };
  }

  /** The ErrorInfo and BadRequest details of a StatusRuntimeException's (or StatusException's) status. */
  static ErrorDetails detailsOf(Throwable t) {
    com.google.rpc.Status proto = StatusProto.fromThrowable(t);
    if (proto == null) {
      return ErrorDetails.NONE;
    }
    String reason = "";
    String domain = "";
    Map<String, String> metadata = Map.of();
    List<ErrorDetails.FieldViolation> causes = new ArrayList<>();
    for (Any detail : proto.getDetailsList()) {
      try {
        if (detail.is(ErrorInfo.class)) {
          ErrorInfo info = detail.unpack(ErrorInfo.class);
          reason = info.getReason();
          domain = info.getDomain();
          metadata = info.getMetadataMap();
        } else if (detail.is(BadRequest.class)) {
          for (BadRequest.FieldViolation v : detail.unpack(BadRequest.class).getFieldViolationsList()) {
            causes.add(new ErrorDetails.FieldViolation(v.getField(), v.getDescription()));
          }
        }
      } catch (InvalidProtocolBufferException ignored) {
        // a malformed detail: keep what the others say
      }
    }
    if (reason.isEmpty() && domain.isEmpty() && metadata.isEmpty() && causes.isEmpty()) {
      return ErrorDetails.NONE;
    }
    return new ErrorDetails(reason, domain, metadata, causes);
  }
}
