#!/bin/sh
# test/gpu_test.sh BINARY [ARGS...] — runs one GPU test binary (label
# "gpu") for ctest and turns its skips into a result ctest can tell apart:
#   a failure                    -> the binary's own non-zero status
#   every test ran and passed    -> 0 (ctest: Passed)
#   any test skipped             -> 77 (SKIP_RETURN_CODE: ctest: Skipped)
#   any test skipped while REPRISE_REQUIRE_GPU=1 -> 1 (ctest: Failed)
#   no test ran nor skipped      -> 1 (a --filter that names no test:
#                                   "Passed" would hide that nothing ran)
# Criterion exits 0 when its tests skip, so without this a binary whose
# every case skipped for want of a device would read "Passed". The skip
# lines ("[SKIP] suite::name: reason", printed by Criterion's --verbose and
# by the TSan runner) are echoed with the rest of the output.
out=$(mktemp "${TMPDIR:-/tmp}/rp_gpu_test.XXXXXX") || exit 1
"$@" >"$out" 2>&1
rc=$?
cat "$out"
# "Test is disabled": a case the run's --filter left out, not a skip
skips=$(grep '^\[SKIP\]' "$out" | grep -vc ': Test is disabled$')
# "[====] Synthesis: Tested: N | ...": Criterion does not count skips in
# N, the TSan runner does
tested=$(sed -n 's/^\[====\] Synthesis: Tested: \([0-9]*\).*/\1/p' "$out" | tail -1)
rm -f "$out"
[ "$rc" -eq 0 ] || exit "$rc"
if [ "${tested:-}" = 0 ] && [ "$skips" -eq 0 ]; then
  echo "gpu_test.sh: no test ran or skipped: does the --filter name one?"
  exit 1
fi
[ "$skips" -gt 0 ] || exit 0
if [ "${REPRISE_REQUIRE_GPU:-0}" = 1 ]; then
  echo "gpu_test.sh: REPRISE_REQUIRE_GPU=1 and $skips test(s) skipped: a GPU was expected"
  exit 1
fi
echo "gpu_test.sh: $skips test(s) skipped (see the [SKIP] lines for why)"
exit 77
