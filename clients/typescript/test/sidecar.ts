// The real sidecar binary, started per test on 127.0.0.1:0, and helpers to
// wait for conditions without timing assertions.
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";

import { connect, type Client, type Logger } from "../src/index.js";

/** How long the sidecar gets to print its listening line. */
const START_TIMEOUT_MS = 30_000;
const LISTENING = /listening transport="(tcp|unix)" (?:address|path)=(\S+)/;

/** The sidecar binary: $WQS_SIDECAR_BIN, else the cargo build in $CARGO_TARGET_DIR (hack/test-typescript builds it). */
export function sidecarBin(): string {
  const cacheDir = process.env["WQS_CACHE_DIR"] ?? join(homedir(), ".cache", "workqueue-sidecar");
  const bin =
    process.env["WQS_SIDECAR_BIN"] ?? join(process.env["CARGO_TARGET_DIR"] ?? join(cacheDir, "target"), "debug", "workqueue-sidecar");
  try {
    accessSync(bin, constants.X_OK);
  } catch {
    throw new Error(`no sidecar binary at ${bin}: run hack/test-typescript, or set WQS_SIDECAR_BIN`);
  }
  return bin;
}

export interface StartOptions {
  /** YAML of a config file (queues, informers). */
  config?: string;
  /** --tcp address; default 127.0.0.1:0. */
  tcp?: string;
  /** Also listen on this unix socket path. */
  unix?: string;
  args?: string[];
}

/** A running sidecar process and what it printed. */
export class Sidecar {
  /** "127.0.0.1:PORT" once listening. */
  address = "";
  unixPath = "";
  readonly lines: string[] = [];
  private constructor(readonly process: ChildProcess) {}

  get target(): string {
    return this.address;
  }

  log(): string {
    return this.lines.join("\n");
  }

  /** SIGTERM, then SIGKILL after 10 s; resolves when it exited. */
  async stop(signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
    const p = this.process;
    if (p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => p.once("exit", () => resolve()));
    p.kill(signal);
    const timer = setTimeout(() => p.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }

  static async start(options: StartOptions = {}, dir: string): Promise<Sidecar> {
    const args = ["--tcp", options.tcp ?? "127.0.0.1:0", "--admin", "off", "--log-format", "text", "--log", "info,workqueue_sidecar=debug"];
    if (options.unix !== undefined) args.push("--unix", options.unix);
    // The suite tests ShutDown, which a sidecar refuses unless allowed.
    args.push("--allow-shutdown-rpc");
    if (options.config !== undefined) {
      const path = join(dir, `sidecar-${Date.now()}-${Math.random().toString(36).slice(2)}.yaml`);
      writeFileSync(path, options.config);
      args.push("--config", path);
    }
    args.push(...(options.args ?? []));
    // The sidecar reads WQS_* variables as flag defaults; none may leak in.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("WQS_")));
    const child = spawn(sidecarBin(), args, { env, stdio: ["ignore", "ignore", "pipe"] });
    const sidecar = new Sidecar(child);
    await new Promise<void>((resolve, reject) => {
      let buffered = "";
      let tcp = false;
      let unix = options.unix === undefined;
      const timer = setTimeout(() => fail("timed out"), START_TIMEOUT_MS);
      let settled = false;
      const fail = (why: string): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        child.kill("SIGKILL");
        reject(new Error(`the sidecar did not start (${why}): ${args.join(" ")}\n${sidecar.log()}`));
      };
      child.once("exit", (code) => fail(`exited with ${code}`));
      child.stderr!.setEncoding("utf8");
      child.stderr!.on("data", (chunk: string) => {
        buffered += chunk;
        const lines = buffered.split("\n");
        buffered = lines.pop() ?? "";
        for (const line of lines) {
          sidecar.lines.push(line);
          const m = LISTENING.exec(line);
          if (m?.[1] === "tcp") {
            sidecar.address = m[2]!;
            tcp = true;
          } else if (m?.[1] === "unix") {
            sidecar.unixPath = m[2]!.replace(/^"|"$/g, "");
            unix = true;
          }
          if (tcp && unix && !settled) {
            settled = true;
            clearTimeout(timer);
            resolve();
          }
        }
      });
    });
    return sidecar;
  }
}

/** Per-test resources: sidecars and clients, stopped and closed when the test ends. */
export class Fixture {
  readonly dir = mkdtempSync(join(tmpdir(), "wqs-ts-test-"));
  private readonly sidecars: Sidecar[] = [];
  private readonly clients: Client[] = [];
  private readonly cleanups: (() => Promise<void> | void)[] = [];

  constructor(t: TestContext) {
    t.after(() => this.close());
  }

  async sidecar(options: StartOptions = {}): Promise<Sidecar> {
    const s = await Sidecar.start(options, this.dir);
    this.sidecars.push(s);
    return s;
  }

  async client(target: string, logger?: Logger): Promise<Client> {
    const c = await connect(target, { workerName: "node-test", ...(logger ? { logger } : {}) });
    this.clients.push(c);
    return c;
  }

  defer(fn: () => Promise<void> | void): void {
    this.cleanups.push(fn);
  }

  async close(): Promise<void> {
    for (const fn of this.cleanups.reverse()) await fn();
    for (const c of this.clients) c.close();
    await Promise.all(this.sidecars.map((s) => s.stop()));
    if (process.env["WQS_TEST_VERBOSE"]) for (const s of this.sidecars) process.stderr.write(`--- sidecar ${s.address}\n${s.log()}\n`);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Polls check every intervalMs until it is true; throws after timeoutMs. */
export async function eventually(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000, intervalMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** A promise that resolves once `open` is called: holds a test's reconcile until the test lets it go. */
export function gate(): { opened: Promise<void>; open: () => void } {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Blocks the event loop for ms: no timer fires, no message is read (a stalled process). */
export function blockFor(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // spin
  }
}

/** A logger that keeps every line, for tests that check what the worker decided. */
export class RecordingLogger implements Logger {
  readonly lines: { level: string; message: string; fields: Record<string, unknown> | undefined }[] = [];
  debug = (message: string, fields?: Record<string, unknown>): void => void this.lines.push({ level: "debug", message, fields });
  info = (message: string, fields?: Record<string, unknown>): void => void this.lines.push({ level: "info", message, fields });
  warn = (message: string, fields?: Record<string, unknown>): void => void this.lines.push({ level: "warn", message, fields });
  error = (message: string, fields?: Record<string, unknown>): void => void this.lines.push({ level: "error", message, fields });

  has(message: string, key?: string): boolean {
    return this.lines.some((l) => l.message.includes(message) && (key === undefined || l.fields?.["key"] === key));
  }
}
