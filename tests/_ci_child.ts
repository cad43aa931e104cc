// A tiny suite for tests/run_all_test.ts: a test that passes, one that needs a component
// (missing when CKPT_CI_CHILD_MISSING says why), and one ignored when CKPT_CI_CHILD_IGNORE=1.
import { componentTest } from "./_ci.ts";

Deno.test("ci child: passes", () => {});

componentTest({ name: "ci child: needs a component", fn() {} }, Deno.env.get("CKPT_CI_CHILD_MISSING") || undefined);

Deno.test({ name: "ci child: ignored by its own flag", ignore: Deno.env.get("CKPT_CI_CHILD_IGNORE") === "1", fn() {} });
