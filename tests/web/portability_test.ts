// The browser blockers, kept out by a scan of the source every browser build includes: Chromium
// has no ReadableStream.from (use readableFrom from src/format/_streams.ts), and `instanceof
// Deno.X` throws a ReferenceError where there is no Deno.
import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT } from "../../web/build.ts";

const DIRS = ["src/format", "src/io", "src/tfjs", "src/background"];
const RULES: [RegExp, string][] = [
  [/ReadableStream\.from\(/, "ReadableStream.from is missing in Chromium: use readableFrom (src/format/_streams.ts)"],
  [/instanceof Deno\./, "instanceof Deno.X throws where there is no Deno"],
];

async function* files(dir: string): AsyncGenerator<string> {
  for await (const e of Deno.readDir(dir)) {
    const p = join(dir, e.name);
    if (e.isDirectory) yield* files(p);
    else if (e.name.endsWith(".ts")) yield p;
  }
}

Deno.test("the core's source uses nothing Chromium lacks", async () => {
  const problems: string[] = [];
  for (const dir of DIRS) {
    for await (const file of files(join(ROOT, dir))) {
      if (file.endsWith("_streams.ts")) continue;
      const lines = (await Deno.readTextFile(file)).split("\n");
      lines.forEach((line, i) => {
        if (/^\s*(\*|\/\/)/.test(line)) return; // docs and comments
        for (const [re, why] of RULES) if (re.test(line)) problems.push(`${file.slice(ROOT.length)}:${i + 1}: ${why}`);
      });
    }
  }
  assert.deepEqual(problems, []);
});
