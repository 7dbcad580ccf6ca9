// Every refusal in clients/error-mapping.tsv, the table all clients' tests
// share, becomes the error class its typescript column names (no sidecar).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { fromGrpc } from "../src/errors.js";
import * as client from "../src/index.js";
import { refusal } from "./refusal.js";

// Run from dist/test/: the table is in clients/, four levels up.
const table = new URL("../../../error-mapping.tsv", import.meta.url);

const rows = readFileSync(table, "utf8")
  .split("\n")
  .map((line, index) => ({ line, number: index + 1 }))
  .filter(({ line }) => line !== "" && !line.startsWith("#"))
  .map(({ line, number }) => {
    const fields = line.split("\t");
    assert.equal(fields.length, 8, `error-mapping.tsv:${number}: ${fields.length} fields, want 8`);
    return { number, fields };
  });

test("the shared table of refusals has lines", () => {
  assert.ok(rows.length > 0);
});

for (const { number, fields } of rows) {
  const [service, codeName, domain, reason, , , expected] = fields as [string, string, string, string, string, string, string];
  test(`error-mapping.tsv:${number}: ${service} ${codeName} ${reason} is a ${expected}`, () => {
    const code = client.Status[codeName as keyof typeof client.Status];
    assert.equal(typeof code, "number", `unknown code ${codeName}`);
    const info = domain === "-" ? undefined : { domain, reason };
    const raised = fromGrpc("call", refusal(code, "refused", info));
    const Expected = (client as Record<string, unknown>)[expected];
    assert.equal(typeof Expected, "function", `${expected} is not exported`);
    assert.equal(raised.constructor, Expected, `${raised.name}, want ${expected}`);
    assert.equal(raised.name, expected);
    assert.equal(raised.code, code);
  });
}
