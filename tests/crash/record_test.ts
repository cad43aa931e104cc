// The recorder (_record.ts) itself: what it logs when calls of concurrent writers interleave.

import assert from "node:assert/strict";
import { join } from "node:path";
import { files, replaceFiles } from "../../src/runtime/files.ts";
import { record } from "./_record.ts";

Deno.test("the recorder logs a directory made inside one another writer made, whichever call's answer comes first", async () => {
  const root = await Deno.makeTempDir({ prefix: "ckpt-record-" });
  // The first mkdir of `parts` answers late (after the directory exists): a second writer meanwhile
  // finds it made, and makes `parts/s2` and a file in it, as two shard writers do.
  let first = true;
  const slowFirstMkdir = replaceFiles({
    ...files,
    mkdir: async (path, options) => {
      await Deno.mkdir(path, options);
      if (first && path.endsWith("parts")) {
        first = false;
        await new Promise((r) => setTimeout(r, 200));
      }
    },
  });
  try {
    const rec = await record(root, async () => {
      const writer = async () => {
        await files.mkdir(join(root, "parts")).catch((e) => {
          if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
        });
        await files.mkdir(join(root, "parts", "s2")).catch((e) => {
          if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
        });
        await files.writeFile(join(root, "parts", "s2", `part-${crypto.randomUUID()}`), new Uint8Array([1]));
      };
      await Promise.all([writer(), writer()]);
    });
    const made = rec.ops.filter((o) => o.op === "mkdir" || o.op === "create").map((o) =>
      `${o.op} ${"name" in o ? o.name : ""}`
    );
    assert.deepEqual(made.map((m) => m.replace(/part-.*/, "part")), [
      "mkdir parts",
      "mkdir s2",
      "create part",
      "create part",
    ]);
  } finally {
    slowFirstMkdir();
    await Deno.remove(root, { recursive: true });
  }
});
