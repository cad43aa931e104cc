// Metadata from untrusted JSON: messages that show the offending value, and no -0 step or epoch.
import assert from "node:assert/strict";
import { loadCheckpoint } from "../../mod.ts";
import { metadataFromJson, validateMetadata } from "../../src/format/metadata.ts";

const utf8 = new TextEncoder();

function jsonCheckpoint(metadata: string): Uint8Array {
  return utf8.encode(`{"ckpt":"jsonl","version":1}\n{"metadata":${metadata}}\n{"sha256":"${"0".repeat(64)}"}\n`);
}

Deno.test("JSON metadata with an object, array or string step or epoch names the value as JSON", async () => {
  const cases: [string, RegExp][] = [
    ['{"step":{"a":1}}', /step is \{"a":1\}, not a non-negative integer/],
    ['{"step":[1,2]}', /step is \[1,2\], not a non-negative integer/],
    ['{"step":"3"}', /step is "3", not a non-negative integer/],
    ['{"step":1,"epoch":{"x":null}}', /epoch is \{"x":null\}, not a non-negative integer/],
    ['{"step":1.5}', /step is 1.5, not a non-negative integer/],
    ['{"epoch":2}', /step is missing, not a non-negative integer/],
  ];
  for (const [meta, re] of cases) {
    await assert.rejects(() => loadCheckpoint(jsonCheckpoint(meta)), (e) => {
      assert.ok(e instanceof SyntaxError, String(e));
      assert.match((e as Error).message, re);
      assert.match((e as Error).message, /^Cannot decode checkpoint: invalid metadata at line 2: /);
      return true;
    });
  }
});

Deno.test("-0 as step or epoch is rejected on read and on write, not re-encoded as 0", async () => {
  for (const meta of ['{"step":-0}', '{"step":0,"epoch":-0}', '{"step":-0.0}']) {
    await assert.rejects(() => loadCheckpoint(jsonCheckpoint(meta)), /is -0, not a non-negative integer/);
  }
  assert.throws(() => metadataFromJson({ step: -0 }, "at offset 16"), /step is -0, not a non-negative integer at|-0/);
  assert.throws(() => validateMetadata({ step: -0 }), TypeError);
  assert.throws(() => validateMetadata({ step: 0, epoch: -0 }), /epoch is -0/);
  validateMetadata({ step: 0, epoch: 0 });
});
