#!/usr/bin/env bash
# What the test suite asserts, counted from the sources: tests (#[test], #[tokio::test],
# proptest! cases) and assertion macros (assert!, assert_eq!, assert_ne!, prop_assert*!), per
# crate. A change that makes the suite faster must not make these smaller (CONTRIBUTING.md).
#
#   tests/bench/suite-size.sh            # this checkout
#   tests/bench/suite-size.sh REV        # another commit, read with git show
set -euo pipefail
rev=${1:-}
. "$(dirname "$0")/sources-at.sh"
printf '%-12s %7s %10s\n' crate tests assertions
for crate in collectors daemon tests; do
  t=0 a=0
  while read -r f; do
    [ -n "$f" ] || continue
    body=$(show "$f")
    t=$((t + $(grep -cE '#\[(tokio::)?test' <<<"$body" || true)))
    a=$((a + $( (grep -oE '\b(prop_)?assert(_eq|_ne)?!' <<<"$body" || true) | wc -l)))
  done < <(files "$crate")
  printf '%-12s %7d %10d\n' "$crate" "$t" "$a"
done
