// A short fuzz run with a fixed seed, part of every test run (a few seconds); `deno task fuzz
// --minutes N` runs the same harness for as long as asked. Also checks that the oracle itself
// catches what it must.
import assert from "node:assert/strict";
import { encodeCheckpoint, loadCheckpoint } from "../../mod.ts";
import { type Case, check, fuzzTempDir, isDomainError, makeCase, makeSeeds, TARGETS } from "./_harness.ts";

const SEED = 20261202;
const PER_TARGET = 15;

Deno.test("fuzz: 15 mutated inputs per decoder (fixed seed) are each decoded exactly or rejected with ckpt's errors", async () => {
  const seeds = await makeSeeds();
  const tmp = await fuzzTempDir("ckpt-fuzz-test-");
  const problems: string[] = [];
  try {
    for (const target of TARGETS) {
      for (let i = 0; i < PER_TARGET; i++) {
        const c = makeCase(seeds, target, SEED, i);
        const { failures } = await check(c, tmp);
        for (const f of failures) {
          problems.push(
            `${f.kind} (${f.reader}): ${f.detail} [deno task fuzz --seed ${SEED} --target ${target} --iteration ${i}]`,
          );
        }
      }
    }
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
  assert.deepEqual(problems, []);
});

Deno.test("fuzz: inputs are a pure function of (seed, target, iteration)", async () => {
  const seeds = await makeSeeds();
  for (const target of TARGETS) {
    const a = makeCase(seeds, target, 7, 3), b = makeCase(seeds, target, 7, 3);
    assert.equal(a.how, b.how);
    assert.deepEqual(a.input, b.input);
  }
});

Deno.test("fuzz oracle flags engine errors, wrong content and readers that disagree", async () => {
  assert.ok(!isDomainError(new RangeError("Invalid DataView length 16")));
  assert.ok(!isDomainError(new TypeError("Cannot read properties of null (reading 'dtype')")));
  assert.ok(isDomainError(new SyntaxError("Cannot decode checkpoint: bad at offset 3")));
  // A valid input whose seed says otherwise: an accepted input that is not its seed is corruption.
  const bytes = new Uint8Array(
    await new Response(encodeCheckpoint({
      metadata: { step: 1 },
      tensors: [{ name: "w", dtype: "uint8", shape: [1], data: new Uint8Array([1]) }],
    })).arrayBuffer(),
  );
  const other = await loadCheckpoint(
    new Uint8Array(
      await new Response(encodeCheckpoint({
        metadata: { step: 1 },
        tensors: [{ name: "w", dtype: "uint8", shape: [1], data: new Uint8Array([2]) }],
      })).arrayBuffer(),
    ),
  );
  const tmp = await Deno.makeTempDir();
  try {
    const c: Case = { target: "binary", iteration: 0, input: { bytes }, fixed: false, how: "test", seed: other };
    const { failures } = await check(c, tmp);
    assert.deepEqual(
      [...new Set(failures.map((f) => f.kind))],
      ["silent corruption"],
    );
    // Marked as re-digested, the same input is accepted without complaint.
    assert.deepEqual((await check({ ...c, fixed: true }, tmp)).failures, []);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});
