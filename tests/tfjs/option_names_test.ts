// The TF.js adapter's options are checked by name, as the core's are: a misspelt one is a
// TypeError naming it and the names allowed.
import { typeError } from "../_util.ts";
import assert from "node:assert/strict";
import { restore, snapshot, StagingPool } from "../../src/tfjs/mod.ts";

Deno.test("the tfjs adapter's options are checked by name too", async () => {
  assert.throws(
    () => new StagingPool({ maxfree: 1 } as never),
    typeError(/unknown option "maxfree" \(known options: maxFree\)/),
  );
  await assert.rejects(
    () => snapshot({ model: [], step: 1, stagin: undefined } as never),
    typeError(/^Cannot snapshot: unknown option "stagin"/),
  );
  await assert.rejects(
    () => restore({ metadata: { step: 1 }, tensors: [] }, { model: [], strickt: false } as never),
    typeError(/^Cannot restore: unknown option "strickt"/),
  );
});
