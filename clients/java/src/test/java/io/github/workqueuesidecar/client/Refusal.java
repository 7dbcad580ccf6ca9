package io.github.workqueuesidecar.client;

import com.google.protobuf.Any;
import com.google.rpc.ErrorInfo;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;

/** Failed calls as the sidecar answers them, for the tests of error mapping. */
final class Refusal {
  private Refusal() {}

  /** The status with its ErrorInfo details. */
  static StatusRuntimeException of(Status.Code code, String message, ErrorInfo... infos) {
    com.google.rpc.Status.Builder status = com.google.rpc.Status.newBuilder().setCode(code.value()).setMessage(message);
    for (ErrorInfo info : infos) {
      status.addDetails(Any.pack(info));
    }
    return StatusProto.toStatusRuntimeException(status.build());
  }
}
