#!/usr/bin/env bash
# Refresh the advisory snapshot the test `advisories::` checks Cargo.lock against, from a
# checkout of the RustSec advisory database (https://github.com/rustsec/advisory-db, CC0):
#
#   git clone https://github.com/rustsec/advisory-db /tmp/advisory-db
#   tests/advisories/refresh.sh /tmp/advisory-db
#
# It keeps the advisories of the crates in Cargo.lock (crates/<name>/RUSTSEC-*.md), the names
# of every crate the database has advisories for (crates.txt: a locked crate named there but
# not kept here means the snapshot is older than the lock file), and the database's commit
# and date (SNAPSHOT). Run it after changing dependencies, and now and then.
set -euo pipefail
db=${1:?usage: refresh.sh ADVISORY_DB_CHECKOUT}
here=$(cd "$(dirname "$0")" && pwd)
lock="$here/../../Cargo.lock"
rm -rf "$here/crates"
mkdir -p "$here/crates"
git -C "$db" ls-tree --name-only HEAD crates/ | sed 's|^crates/||' | sort >"$here/crates.txt"
sed -n 's/^name = "\(.*\)"$/\1/p' "$lock" | sort -u | while read -r name; do
  if grep -qxF "$name" "$here/crates.txt"; then
    mkdir -p "$here/crates/$name"
    for f in $(git -C "$db" ls-tree --name-only HEAD "crates/$name/"); do
      git -C "$db" show "HEAD:$f" >"$here/crates/$name/$(basename "$f")"
    done
  fi
done
git -C "$db" log -1 --format='commit %H%ndate %cs' >"$here/SNAPSHOT"
echo "kept $(find "$here/crates" -name '*.md' | wc -l) advisories of $(ls "$here/crates" | wc -l) locked crates; $(wc -l <"$here/crates.txt") crates in the database"
