#!/usr/bin/env node
// Generates the TypeScript stubs (src/gen/) from proto/ with buf and ts-proto.
//
//   node scripts/gen-stubs.mjs          regenerate in place
//   node scripts/gen-stubs.mjs --check  regenerate into a temp dir; fail on any difference
//
// buf (@bufbuild/buf) and the ts-proto plugin both come from node_modules at
// the versions package-lock.json pins (run `npm ci` first); the template is
// buf.gen.yaml, run from the repository root.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const root = resolve(pkg, "../..");
const buf = join(pkg, "node_modules/.bin/buf");
const template = relative(root, join(pkg, "buf.gen.yaml"));
const stubs = join(pkg, "src/gen");

const args = process.argv.slice(2);
if (args.length > 1 || (args.length === 1 && args[0] !== "--check")) {
  console.error("usage: node scripts/gen-stubs.mjs [--check]");
  process.exit(2);
}

if (args[0] !== "--check") {
  rmSync(stubs, { recursive: true, force: true });
  execFileSync(buf, ["generate", "--template", template], { cwd: root, stdio: "inherit" });
  console.error(`gen-stubs: regenerated ${relative(root, stubs)}`);
  process.exit(0);
}

/** Every file under dir, as paths relative to it. */
function files(dir) {
  const out = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(relative(dir, p));
    }
  };
  walk(dir);
  return out.sort();
}

const tmp = mkdtempSync(join(tmpdir(), "wqs-ts-stubs-"));
try {
  execFileSync(buf, ["generate", "--template", template, "--output", tmp], { cwd: root, stdio: "inherit" });
  const fresh = join(tmp, relative(root, stubs));
  const want = files(fresh);
  const have = files(stubs);
  const differ = [];
  for (const f of new Set([...want, ...have])) {
    if (!want.includes(f)) differ.push(`${f}: checked in but no longer generated`);
    else if (!have.includes(f)) differ.push(`${f}: generated but not checked in`);
    else if (readFileSync(join(fresh, f), "utf8") !== readFileSync(join(stubs, f), "utf8")) differ.push(`${f}: differs`);
  }
  if (differ.length > 0) {
    for (const d of differ) console.error(`  ${d}`);
    console.error(`gen-stubs: ${relative(root, stubs)} differs from proto/; run \`npm run gen\` in clients/typescript and commit the result`);
    process.exit(1);
  }
  console.error(`gen-stubs: ${relative(root, stubs)} is current`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
