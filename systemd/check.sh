#!/usr/bin/env bash
# Verify the unit files (with their Documentation= man pages) and score the service's
# exposure. Run by .ci/run where systemd-analyze exists. Fails if the security score is worse
# than 2.5.
set -euo pipefail
cd "$(dirname "$0")"
# verify resolves ExecStart= binaries: point it at a stand-in when wattson is not installed.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for unit in *.service *.timer; do
  [ -e "$unit" ] || continue
  sed -e "s#/usr/bin/wattson#/bin/true#g" "$unit" > "$tmp/$unit"
done
# --man=yes runs man(1) on each Documentation=man:... page: find ours where the package
# installs them (usr/share/man/man1), here in the repository's generated copies.
command -v man >/dev/null || { echo "systemd/check.sh needs man (apt-get install man-db)" >&2; exit 1; }
mkdir -p "$tmp/man/man1"
cp ../daemon/dist/man/*.1 "$tmp/man/man1/"
( cd "$tmp" && MANPATH="$tmp/man" SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=yes ./*.service ./*.timer ) 2>&1 | tee "$tmp/verify.log"
if grep -v -E "Failed to (connect|prepare|find)|not-found|Unit .* not found" "$tmp/verify.log" | grep -q .; then
  echo "systemd-analyze verify reported problems" >&2
  exit 1
fi
# The pages the units name must be among ours (not found elsewhere on MANPATH by chance).
for page in $(sed -n 's/^Documentation=.*man:\([a-z-]*\)(1).*/\1/p' ./*.service ./*.timer | sort -u); do
  [ -e "../daemon/dist/man/$page.1" ] || { echo "Documentation=man:$page(1) has no page in daemon/dist/man" >&2; exit 1; }
done
score=$(systemd-analyze security --offline=true --no-pager "$tmp/wattson.service" 2>/dev/null \
  | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
echo "systemd-analyze security: exposure ${score:-unknown}"
[ -n "$score" ] || { echo "could not read the exposure score" >&2; exit 1; }
awk -v s="$score" 'BEGIN { exit !(s <= 2.5) }' || { echo "exposure $score is worse than 2.5" >&2; exit 1; }
# [http] (/metrics, the live page) needs TCP: the hardening must leave AF_INET and AF_INET6
# and deny no address, and no private network.
grep -q '^RestrictAddressFamilies=.*AF_INET AF_INET6' wattson.service \
  || { echo "wattson.service: RestrictAddressFamilies= must allow AF_INET AF_INET6 for [http]" >&2; exit 1; }
if grep -E -q '^(IPAddressDeny=.+|PrivateNetwork=yes)' wattson.service; then
  echo "wattson.service: IPAddressDeny=/PrivateNetwork= would stop [http] being reached" >&2; exit 1
fi
