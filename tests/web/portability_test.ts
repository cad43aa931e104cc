// The browser blockers, kept out by a scan of the source every browser build includes: Chromium
// has no ReadableStream.from (use readableFrom from src/format/_streams.ts), and `instanceof
// Deno.X` throws a ReferenceError where there is no Deno.
import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT, webSources } from "../../web/build.ts";

const RULES: [RegExp, string][] = [
  [/ReadableStream\.from\(/, "ReadableStream.from is missing in Chromium: use readableFrom (src/format/_streams.ts)"],
  [/instanceof Deno\./, "instanceof Deno.X throws where there is no Deno"],
];

Deno.test("the source the browser build includes uses nothing Chromium lacks", async () => {
  const sources = await webSources();
  // The build's graph: the layers mod.ts and the other entries pull in, not a list kept by hand.
  for (
    const dir of ["src/format", "src/io", "src/tfjs", "src/background", "src/storage", "src/manager", "src/interop"]
  ) {
    assert.ok(sources.some((f) => f.startsWith(`${dir}/`)), `the browser build includes ${dir}`);
  }
  assert.ok(sources.includes("src/runtime/process.ts"), "the browser build includes src/runtime");
  const problems: string[] = [];
  for (const file of sources) {
    if (file.endsWith("_streams.ts") || !file.endsWith(".ts")) continue;
    const lines = (await Deno.readTextFile(join(ROOT, file))).split("\n");
    lines.forEach((line, i) => {
      if (/^\s*(\*|\/\/)/.test(line)) return; // docs and comments
      for (const [re, why] of RULES) if (re.test(line)) problems.push(`${file}:${i + 1}: ${why}`);
    });
  }
  assert.deepEqual(problems, []);
});
