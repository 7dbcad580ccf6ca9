// The users example (examples/users) end to end, as a separate process
// against the real sidecar and a kube-apiserver: the same cases as the Go
// and Python examples' tests. Skipped without WQS_KUBECONFIG.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { labelValue } from "../examples/users/users.js";
import { eventually, Fixture } from "./sidecar.js";

const kubeconfig = process.env["WQS_KUBECONFIG"];
const skip = kubeconfig ? false : 'needs a kube-apiserver: hack/control-plane up; eval "$(hack/control-plane env)"';
const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..", "..", "..");
const USER = { apiVersion: "example.com/v1", kind: "User" };

// The sidecar config of deploy/overlays/users, with the queue's finalizer.
const CONFIG = `
informers:
  users: { group: example.com, version: v1, kind: User }
  namespaces:
    version: v1
    kind: Namespace
    label_selector: app.kubernetes.io/managed-by=users-reconciler
    metadata_only: true
queues:
  users:
    primary: users
    finalizer: example.com/namespace
    triggers: [{ informer: namespaces, by: owner, controller_only: true }]
`;

interface Namespace {
  metadata: { deletionTimestamp?: string; labels?: Record<string, string>; annotations?: Record<string, string>; ownerReferences?: { uid: string; controller?: boolean }[] };
}

test("labelValue makes a valid label value", () => {
  assert.equal(labelValue("Ada Lovelace!"), "Ada-Lovelace");
  assert.equal(labelValue("-x-".repeat(40)).length <= 63, true);
});

test("users example: owned, labelled Namespaces; a display-name change follows; a deleted User takes its Namespace", { skip }, async (t) => {
  const crd = spawnSync(join(repo, "hack", "control-plane"), ["kubectl", "apply", "-f", join(repo, "deploy", "crds", "user.yaml")], { encoding: "utf8" });
  assert.equal(crd.status, 0, `${crd.stdout}${crd.stderr}`);
  spawnSync(join(repo, "hack", "control-plane"), ["kubectl", "wait", "--for=condition=Established", "crd/users.example.com", "--timeout=60s"]);

  const f = new Fixture(t);
  const sidecar = await f.sidecar({ config: CONFIG, args: ["--kubeconfig", kubeconfig!] });
  const client = await f.client(sidecar.target);
  const worker = spawn(process.execPath, [join(here, "..", "examples", "users", "users.js")], {
    env: { ...process.env, WORKQUEUE_SIDECAR_TARGET: sidecar.target },
    stdio: ["ignore", "inherit", "inherit"],
  });
  f.defer(async () => {
    worker.kill("SIGTERM");
    await new Promise((resolve) => worker.once("exit", resolve));
  });

  const id = `ts${Date.now() % 1_000_000}`;
  const names = [`${id}-ada`, `${id}-bob`];
  f.defer(async () => {
    for (const name of names) await client.objects.delete(USER, "", name).catch(() => {});
  });
  const users = new Map<string, string>();
  for (const name of names) {
    const created = await client.objects.create({ ...USER, metadata: { name }, spec: { display_name: `User ${name}` } });
    users.set(name, created.uid);
  }
  const namespace = (user: string) => client.cache.get<Namespace>("namespaces", "", `user-${user}`, { waitMs: 10_000 });

  for (const name of names) {
    await eventually(`namespace of ${name}`, async () => (await namespace(name)) !== undefined, 30_000);
    const ns = (await namespace(name))!;
    assert.equal(ns.metadata.labels?.["example.com/display-name"], labelValue(`User ${name}`));
    assert.deepEqual(ns.metadata.ownerReferences?.filter((o) => o.controller).map((o) => o.uid), [users.get(name)]);
  }

  // A display-name change follows.
  await client.objects.patch(USER, "", names[0]!, { spec: { display_name: "Ada L." } });
  await eventually("the new display name", async () => (await namespace(names[0]!))?.metadata.annotations?.["example.com/display-name"] === "Ada L.", 30_000);

  // Deleting a User deletes its Namespace, then the User goes (the sidecar removes its finalizer).
  await client.objects.delete(USER, "", names[1]!);
  await eventually("the User gone", async () => (await client.cache.get("users", "", names[1]!, { waitMs: 10_000 })) === undefined, 30_000);
  const ns = await namespace(names[1]!);
  assert.ok(ns === undefined || ns.metadata.deletionTimestamp !== undefined, "its Namespace deleted (Terminating without a namespace controller)");
});
