#!/usr/bin/env bash
# Verify the unit files and score the service's exposure. Run by .ci/run where
# systemd-analyze exists. Fails if the security score is worse than 2.5.
set -euo pipefail
cd "$(dirname "$0")"
# verify resolves ExecStart= binaries: point it at a stand-in when wattson is not installed.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for unit in *.service *.timer; do
  [ -e "$unit" ] || continue
  sed -e "s#/usr/bin/wattson#/bin/true#g" "$unit" > "$tmp/$unit"
done
( cd "$tmp" && SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no ./*.service ./*.timer ) 2>&1 | tee "$tmp/verify.log"
if grep -v -E "Failed to (connect|prepare|find)|not-found|Unit .* not found" "$tmp/verify.log" | grep -q .; then
  echo "systemd-analyze verify reported problems" >&2
  exit 1
fi
score=$(systemd-analyze security --offline=true --no-pager "$tmp/wattson.service" 2>/dev/null \
  | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
echo "systemd-analyze security: exposure ${score:-unknown}"
[ -n "$score" ] || { echo "could not read the exposure score" >&2; exit 1; }
awk -v s="$score" 'BEGIN { exit !(s <= 2.5) }' || { echo "exposure $score is worse than 2.5" >&2; exit 1; }
