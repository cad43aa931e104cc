// The names an assertion and a snapshot add to a comparison's options (src/compare/_option_names.ts),
// held complete by the compiler, so that a misspelt one is a TypeError rather than ignored.
import type { DiffOptions } from "../compare/checkpoint_diff.ts";
import { optionNames } from "../format/_options.ts";
import type { AssertCheckpointOptions } from "./assert.ts";
import type { SnapshotAssertOptions } from "./snapshot.ts";

/** What {@linkcode assertCheckpointEquals} adds to a comparison's options. */
export const ASSERT_OPTION_NAMES: readonly string[] = optionNames<Omit<AssertCheckpointOptions, keyof DiffOptions>>()(
  ["maxEntries", "message", "decode"],
);

/** What {@linkcode assertCheckpointSnapshot} adds to an assertion's options. */
export const SNAPSHOT_OPTION_NAMES: readonly string[] = optionNames<
  Omit<SnapshotAssertOptions, keyof AssertCheckpointOptions>
>()(["name", "dir", "update", "compression"]);
