# Sourced by the scripts that count the sources (suite-size.sh, code-size.sh): from the
# repository's root, `files DIR` lists the .rs files under DIR and `show FILE` prints one,
# of this checkout, or of commit $rev when it is set (read with git, nothing checked out).
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
files() {
  if [ -n "$rev" ]; then git ls-tree -r --name-only "$rev" -- "$1" | grep '\.rs$'
  else git ls-files -- "$1" | grep '\.rs$'; fi
}
show() { if [ -n "$rev" ]; then git show "$rev:$1"; else cat "$1"; fi; }
