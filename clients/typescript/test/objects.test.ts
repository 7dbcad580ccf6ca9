// Writes through the sidecar: each call and its errors (C12), and writes
// under a lease, fenced by it (C13). The Kubernetes parts need a
// kube-apiserver (WQS_KUBECONFIG) and are skipped without one.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  AbortedError,
  AlreadyExistsError,
  InvalidArgumentError,
  NoKubernetesError,
  NotFoundError,
  StaleLeaseError,
  type Client,
  type LeaseRef,
} from "../src/index.js";
import { eventually, Fixture } from "./sidecar.js";

const kubeconfig = process.env["WQS_KUBECONFIG"];
const skip = kubeconfig ? false : 'needs a kube-apiserver: hack/control-plane up; eval "$(hack/control-plane env)"';
const type = { apiVersion: "v1", kind: "ConfigMap" };

interface ConfigMap {
  metadata: { name: string; resourceVersion: string };
  data?: Record<string, string>;
}

test("C12 a standalone sidecar refuses every write with NoKubernetesError, never StaleLeaseError", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar()).target);
  const cm = { ...type, metadata: { name: "a", namespace: "default" } };
  for (const write of [
    () => client.objects.apply(cm),
    () => client.objects.create(cm),
    () => client.objects.patch(type, "default", "a", { data: {} }),
    () => client.objects.delete(type, "default", "a"),
  ]) {
    const err = await write().then(
      () => assert.fail("the write should be refused"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof NoKubernetesError, `${String(err)}`);
    assert.ok(!(err instanceof StaleLeaseError));
    assert.equal(err.reason, "NO_KUBERNETES");
  }
});

async function kubernetesSidecar(f: Fixture, id: string): Promise<Client> {
  const config = `
informers:
  cms: { version: v1, kind: ConfigMap, namespace: default, label_selector: wqs-ts-objects=${id} }
queues:
  cms: { primary: cms }
writes:
  - { kind: ConfigMap, namespaces: [default], lease: optional }
`;
  return f.client((await f.sidecar({ config, args: ["--kubeconfig", kubeconfig!] })).target);
}

test("C12 writes reach the API server, and its refusals come back typed with its reason", { skip }, async (t) => {
  const f = new Fixture(t);
  const id = `wqs-ts-objects-${Date.now() % 1_000_000}`;
  const client = await kubernetesSidecar(f, id);
  const name = `${id}-a`;
  const cm = { ...type, metadata: { name, namespace: "default", labels: { "wqs-ts-objects": id } }, data: { v: "1" } };
  f.defer(async () => {
    await client.objects.delete(type, "default", name).catch(() => {});
  });

  const created = await client.objects.create(cm);
  assert.equal(created.json<ConfigMap>().data?.["v"], "1");
  const exists = await client.objects.create(cm).catch((e: unknown) => e);
  assert.ok(exists instanceof AlreadyExistsError && exists instanceof AbortedError, `${String(exists)}`);
  assert.equal(exists.reason, "AlreadyExists");

  const merged = await client.objects.patch(type, "default", name, { data: { v: "2" } });
  assert.equal(merged.json<ConfigMap>().data?.["v"], "2");
  const jsonPatched = await client.objects.patch(type, "default", name, [{ op: "replace", path: "/data/v", value: "3" }], { type: "json" });
  assert.equal(jsonPatched.json<ConfigMap>().data?.["v"], "3");
  const applied = await client.objects.apply({ ...cm, data: { v: "4" } }, { force: true });
  assert.equal(applied.json<ConfigMap>().data?.["v"], "4");

  // A stale resourceVersion is a conflict.
  const stale = await client.objects
    .patch(type, "default", name, { metadata: { resourceVersion: created.resourceVersion }, data: { v: "5" } })
    .catch((e: unknown) => e);
  assert.ok(stale instanceof AbortedError, `${String(stale)}`);
  assert.equal(stale.reason, "Conflict");
  // An invalid object, and a missing one.
  const invalid = await client.objects.create({ ...type, metadata: { name: "Not_A_Name", namespace: "default" } }).catch((e: unknown) => e);
  assert.ok(invalid instanceof InvalidArgumentError, `${String(invalid)}`);
  assert.equal(invalid.reason, "Invalid");
  await assert.rejects(client.objects.patch(type, "default", `${id}-none`, { data: {} }), NotFoundError);

  const deleted = await client.objects.delete(type, "default", name);
  assert.equal(deleted.gone, true);
});

test("C13 writes under a lease are made while it is current and refused, not made, after it ended", { skip }, async (t) => {
  const f = new Fixture(t);
  const id = `wqs-ts-fenced-${Date.now() % 1_000_000}`;
  const client = await kubernetesSidecar(f, id);
  const name = `${id}-a`;
  f.defer(async () => {
    await client.objects.delete(type, "default", name).catch(() => {});
  });
  await client.objects.create({ ...type, metadata: { name, namespace: "default", labels: { "wqs-ts-objects": id } }, data: { v: "0" } });

  let held: LeaseRef | undefined;
  const controller = new AbortController();
  const done = client.queue("cms").run(
    async (req) => {
      if (req.name !== name || held !== undefined) return;
      held = req.lease;
      await client.objects.patch(type, "default", name, { data: { v: "under the lease" } }, { lease: req.lease });
    },
    { signal: controller.signal },
  );
  f.defer(async () => {
    controller.abort();
    await done;
  });
  await eventually("a reconcile that wrote under its lease", () => held !== undefined, 20_000);
  const key = `default/${name}`;
  await eventually("the lease ended", async () => (await client.queue("cms").keyState(key)).state !== "HELD", 20_000);

  const refused = await client.objects
    .patch(type, "default", name, { data: { v: "after the lease" } }, { lease: held! })
    .catch((e: unknown) => e);
  assert.ok(refused instanceof StaleLeaseError, `${String(refused)}`);
  assert.equal(refused.reason, "STALE_LEASE");
  const now = await client.cache.get<ConfigMap>("cms", "default", name, { waitMs: 10_000 });
  assert.equal(now?.data?.["v"], "under the lease", "the refused write was not made");
});
