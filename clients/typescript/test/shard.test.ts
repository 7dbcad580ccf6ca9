// KeyState's shard place (C14): one replica of a shard group, its Lease on
// a kube-apiserver (WQS_KUBECONFIG), skipped without one.
import assert from "node:assert/strict";
import { test } from "node:test";

import type { KeyInfo } from "../src/index.js";
import { eventually, Fixture } from "./sidecar.js";

const kubeconfig = process.env["WQS_KUBECONFIG"];
const skip = kubeconfig ? false : 'needs a kube-apiserver: hack/control-plane up; eval "$(hack/control-plane env)"';
const NAMESPACE = { apiVersion: "v1", kind: "Namespace" };
const IDENTITY = "r0";
/** A 3 s Lease renewed every 0.5 s, as the sidecar's own replica tests. */
const FAST_LEASES = ["--leader-election-lease-duration", "3s", "--leader-election-renew-deadline", "2s", "--leader-election-retry-period", "500ms"];

test("C14 a key's shard place: the replica that owns its slot, granted here; none in a queue that is not sharded", { skip }, async (t) => {
  const f = new Fixture(t);
  // The replica's Lease goes in a namespace of the test's own, made (and
  // deleted) through the sidecar: the replica keeps trying to write its
  // Lease until the namespace exists.
  const ns = `tsshard-${Date.now() % 1_000_000}`;
  // The informer selects nothing: by namespace, a key's slot comes from the key.
  const config = `
informers:
  cms: { version: v1, kind: ConfigMap, namespace: ${ns}, label_selector: none=none }
queues:
  sharded: { primary: cms, shard_by: namespace }
  plain: {}
writes:
  - { kind: Namespace, verbs: [create, delete], lease: optional }
`;
  const args = ["--kubeconfig", kubeconfig!, "--shard-group", "shards", "--leader-election-namespace", ns, "--leader-election-identity", IDENTITY, ...FAST_LEASES];
  const client = await f.client((await f.sidecar({ config, args })).target);
  await client.objects.create({ ...NAMESPACE, metadata: { name: ns } });
  f.defer(async () => void (await client.objects.delete(NAMESPACE, "", ns).catch(() => {})));

  const key = `${ns}/a`;
  let info: KeyInfo | undefined;
  await eventually(
    "the replica to own the key's slot",
    async () => {
      info = await client.queue("sharded").keyState(key);
      return info.shard?.grantedHere === true;
    },
    30_000,
  );
  const shard = info!.shard!;
  assert.ok(shard.slot !== undefined && shard.slot >= 0 && shard.slot < 4096, `slot ${shard.slot}`);
  assert.equal(shard.owner, IDENTITY);

  const plain = await client.queue("plain").keyState(key);
  assert.equal(plain.shard, undefined);
});
