// bench/clients' TypeScript worker: the client's queue.run with a handler that
// returns success at once, until N reconciles have returned.
//
//   node dist/noop.js TARGET QUEUE N CONCURRENCY
//
// Prints one line: result reconciles=N elapsed_s=... cpu_s=... rss_kib=...,
// from the first reconcile's start to the N-th reconcile's return (CPU time
// of this process over the same span, VmRSS then).
import { readFileSync } from "node:fs";
import { connect } from "@workqueue-sidecar/client";

const [target, queue, count, concurrency] = process.argv.slice(2) as [string, string, string, string];
const n = Number(count);
const stop = new AbortController();
let done = 0;
let t0 = 0, t1 = 0, c0 = 0, c1 = 0, rss = 0;

async function noop(): Promise<void> {
  if (done === 0) [t0, c0] = [performance.now(), cpu()];
  if (++done === n) {
    [t1, c1, rss] = [performance.now(), cpu(), rssKiB()];
    stop.abort();
  }
}

/** This process's CPU time so far (user + system), seconds. */
function cpu(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

/** VmRSS from /proc/self/status. */
function rssKiB(): number {
  return Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync("/proc/self/status", "utf8"))?.[1]);
}

const client = await connect(target);
await client.queue(queue).run(noop, { concurrency: Number(concurrency), signal: stop.signal });
client.close();
console.log(`result reconciles=${done} elapsed_s=${((t1 - t0) / 1000).toFixed(6)} cpu_s=${(c1 - c0).toFixed(6)} rss_kib=${rss}`);
