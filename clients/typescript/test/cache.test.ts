// Cache reads (C11) against a real informer, and object writes through the
// sidecar; needs a kube-apiserver (WQS_KUBECONFIG), skipped without one.
import assert from "node:assert/strict";
import { test } from "node:test";

import { NotFoundError, type Client } from "../src/index.js";
import { eventually, Fixture } from "./sidecar.js";

const kubeconfig = process.env["WQS_KUBECONFIG"];
const skip = kubeconfig ? false : 'needs a kube-apiserver: hack/control-plane up; eval "$(hack/control-plane env)"';

interface ConfigMap {
  metadata: { name: string; namespace: string; resourceVersion: string; labels?: Record<string, string> };
  data?: Record<string, string>;
}

test("cache reads of a standalone sidecar: an unknown informer is NotFoundError", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar()).target);
  await assert.rejects(client.cache.get("nope", "default", "x"), NotFoundError);
});

test("C11 cache reads: get, list by namespace and label selector, index, read-your-writes", { skip }, async (t) => {
  const f = new Fixture(t);
  const id = `wqs-ts-${Date.now() % 1_000_000}`;
  const selector = `wqs-ts-test=${id}`;
  const config = `
informers:
  cms:
    version: v1
    kind: ConfigMap
    namespace: default
    label_selector: ${selector}
    indexes:
      team: { field: data.team }
queues:
  cms:
    primary: cms
writes:
  - { kind: ConfigMap, namespaces: [default], lease: optional }
`;
  const client: Client = await f.client((await f.sidecar({ config, args: ["--kubeconfig", kubeconfig!] })).target);
  const type = { apiVersion: "v1", kind: "ConfigMap" };
  const cm = (name: string, team: string) => ({
    ...type,
    metadata: { name, namespace: "default", labels: { "wqs-ts-test": id } },
    data: { team },
  });
  const a = `${id}-a`;
  const b = `${id}-b`;
  f.defer(async () => {
    for (const name of [a, b]) await client.objects.delete(type, "default", name).catch(() => {});
  });
  await client.objects.apply(cm(a, "red"));
  const wroteB = await client.objects.create(cm(b, "blue"));

  const got = await client.cache.get<ConfigMap>("cms", "default", b, { minResourceVersion: wroteB.resourceVersion, waitMs: 30_000 });
  assert.equal(got?.metadata.name, b);
  assert.equal(got?.data?.["team"], "blue");
  assert.equal(await client.cache.get("cms", "default", `${id}-none`, { waitMs: 10_000 }), undefined);

  await eventually("both objects in the cache", async () => (await client.cache.list("cms", { namespace: "default" })).length === 2, 30_000);
  const all = await client.cache.list<ConfigMap>("cms", { namespace: "default", labelSelector: selector, pageSize: 1 });
  assert.deepEqual(all.map((o) => o.metadata.name), [a, b]);
  const blue = await client.cache.list<ConfigMap>("cms", { index: "team", value: "blue" });
  assert.deepEqual(blue.map((o) => o.metadata.name), [b]);
  assert.deepEqual(await client.cache.list("cms", { labelSelector: "wqs-ts-test=nobody" }), []);

  // Read-your-writes: wait for the version the API server returned.
  const patched = await client.objects.patch(type, "default", a, { data: { team: "green" } });
  const read = await client.cache.getObject("cms", "default", a, { minResourceVersion: patched.resourceVersion, waitMs: 10_000 });
  assert.equal(read?.resourceVersion, patched.resourceVersion);
  assert.equal(read?.json<ConfigMap>().data?.["team"], "green");
  await assert.rejects(client.cache.get("nope", "default", a), NotFoundError);
});
