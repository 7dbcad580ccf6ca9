// One unary call as a Promise, its failure as a WorkqueueError.
import type { ServiceError } from "@grpc/grpc-js";

import { fromGrpc } from "./errors.js";

export function unary<Res>(op: string, invoke: (callback: (err: ServiceError | null, res: Res) => void) => unknown): Promise<Res> {
  return new Promise((resolve, reject) => {
    invoke((err, res) => (err ? reject(fromGrpc(op, err)) : resolve(res)));
  });
}
