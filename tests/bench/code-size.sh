#!/usr/bin/env bash
# The product's code, counted from the sources: lines of daemon/src and collectors/src that
# are not tests (files named tests.rs or under a tests/ folder are left out, and a file's
# `#[cfg(test)]` module from that line on), blank and comment-only lines apart.
#
#   tests/bench/code-size.sh            # this checkout
#   tests/bench/code-size.sh REV        # another commit, read with git show
set -euo pipefail
rev=${1:-}
. "$(dirname "$0")/sources-at.sh"
printf '%-16s %7s %7s %9s\n' tree code comment blank
for tree in daemon/src collectors/src; do
  files "$tree" | grep -vE '(^|/)tests(\.rs$|/)' | while read -r f; do
    # One file: its lines up to a `#[cfg(test)]` module, by kind.
    show "$f" | awk '
      /^#\[cfg\(test\)\]/ { skip = 1 }
      skip { next }
      /^[[:space:]]*$/ { blank++; next }
      /^[[:space:]]*\/\// { comment++; next }
      { code++ }
      END { print code + 0, comment + 0, blank + 0 }'
  done | awk -v tree="$tree" '{ c += $1; m += $2; b += $3 }
    END { printf "%-16s %7d %7d %9d\n", tree, c, m, b }'
done
