// A failed call as the sidecar answers it, for the unit tests of error mapping.
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { Metadata, type ServiceError } from "@grpc/grpc-js";

import { Status } from "../src/index.js";

/** The status with its google.rpc.ErrorInfo (when given) in the `grpc-status-details-bin` trailer. */
export function refusal(code: Status, message: string, info?: { domain: string; reason: string }): ServiceError {
  const metadata = new Metadata();
  if (info !== undefined) {
    const errorInfo = new BinaryWriter()
      .tag(1, WireType.LengthDelimited).string(info.reason)
      .tag(2, WireType.LengthDelimited).string(info.domain)
      .finish();
    const any = new BinaryWriter()
      .tag(1, WireType.LengthDelimited).string("type.googleapis.com/google.rpc.ErrorInfo")
      .tag(2, WireType.LengthDelimited).bytes(errorInfo)
      .finish();
    const status = new BinaryWriter()
      .tag(1, WireType.Varint).int32(code)
      .tag(2, WireType.LengthDelimited).string(message)
      .tag(3, WireType.LengthDelimited).bytes(any)
      .finish();
    metadata.set("grpc-status-details-bin", Buffer.from(status));
  }
  return Object.assign(new Error(`${code} ${Status[code]}: ${message}`), { code, details: message, metadata });
}
