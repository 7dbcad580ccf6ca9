// Seed 001's controller in TypeScript: every User (example.com/v1, cluster-scoped)
// gets a Namespace "user-<name>" that it owns, labelled and annotated with its
// display name; a deleted User has its Namespace deleted first.
//
// The sidecar does the rest (deploy/overlays/users/config.yaml): it watches
// Users and their Namespaces, keeps the queue's declared finalizer on every
// live User and removes it once a deleting User's reconcile succeeds, and
// does not lease a User again before its caches have seen this reconcile's
// writes (they name the lease). No Kubernetes client library is needed.
//
//   WORKQUEUE_SIDECAR_TARGET=unix:///run/workqueue-sidecar/grpc.sock node dist/examples/users/users.js
import { abortOnSignals, connect, controllerRef, NotFoundError, type Request } from "../../src/index.js";

/** The field manager of this reconciler's writes, and its managed-by label. */
const MANAGER = "users-reconciler";
const NAMESPACE = { apiVersion: "v1", kind: "Namespace" };

interface User {
  apiVersion: string;
  kind: string;
  metadata: { name: string; uid: string };
  spec: { display_name: string };
}

/** A valid label value: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends. */
export function labelValue(text: string): string {
  return text.replace(/[^A-Za-z0-9._-]/g, "-").slice(0, 63).replace(/^[-_.]+|[-_.]+$/g, "");
}

export async function reconcile(client: Awaited<ReturnType<typeof connect>>, req: Request): Promise<void> {
  const namespace = `user-${req.name}`;
  if (req.deleting) {
    // Clean up, then return: the sidecar removes the User's finalizer.
    await client.objects.delete(NAMESPACE, "", namespace, { lease: req.lease }).catch((err: unknown) => {
      if (!(err instanceof NotFoundError)) throw err;
    });
    return;
  }
  const user = req.object?.deleted === false ? req.object.json<User>() : undefined;
  if (user === undefined) return; // gone
  const displayName = user.spec.display_name;
  const metadata = {
    name: namespace,
    labels: { "app.kubernetes.io/managed-by": MANAGER, "example.com/user": req.name, "example.com/display-name": labelValue(displayName) },
    annotations: { "example.com/display-name": displayName },
    ownerReferences: [controllerRef(user)],
  };
  await client.objects.apply({ ...NAMESPACE, metadata }, { lease: req.lease, fieldManager: MANAGER, force: true });
}

async function main(): Promise<void> {
  const client = await connect(process.env["WORKQUEUE_SIDECAR_TARGET"] ?? "unix:///run/workqueue-sidecar/grpc.sock");
  await client.queue("users").run((req) => reconcile(client, req), { concurrency: 4, includeObject: true, signal: abortOnSignals() });
  client.close();
}

if (process.argv[1]?.endsWith("users.js")) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
