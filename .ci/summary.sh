# The closing line of a CI run, sourced by .ci/run (tests/ci_summary_test.ts runs it on literal logs).
#
# closing_line LOG RC: prints "N passed, N failed, N skipped" from the last such line of LOG, the
# output of `deno task test` (tests/run_all.ts: the Deno suite, then the Node suite, one line
# counting both, and above it what was skipped and why), and returns RC. A run that exited
# non-zero with no failure counted counts one; a log with no such line is one failure.
closing_line() {
  local log=$1 rc=$2 summary passed failed skipped
  summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1)
  if [ -z "$summary" ]; then
    echo "no test summary found (exit code $rc)"
    echo "0 passed, 1 failed, 0 skipped"
    return 1
  fi
  passed=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$summary")
  failed=$(sed -E 's/.*, ([0-9]+) failed,.*/\1/' <<<"$summary")
  skipped=$(sed -E 's/.*, ([0-9]+) skipped$/\1/' <<<"$summary")
  if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
  echo "$passed passed, $failed failed, $skipped skipped"
  return "$rc"
}
