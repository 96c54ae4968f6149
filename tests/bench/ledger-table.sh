#!/usr/bin/env bash
# The "one ledger" table (issue 13), measured through the real binary: a simulated PZEM at a
# fixed 50 W sampled at 1 s, 2 s, 500 ms and 5 s; a fleet host at 35 W in a collector's
# database (and its own); a Tasmota plug at 80 W reporting every 2 s. Each runs for
# $SECONDS_PER_ROW (default 60) of real time, then prints what `wattson report` (measured
# section) and `wattson status` say. Needs mosquitto for the fleet and plug rows.
#
#   bash tests/bench/ledger-table.sh            # uses target/release/wattson (built if missing)
#   WATTSON=target/debug/wattson SECONDS_PER_ROW=30 bash tests/bench/ledger-table.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
bin=${WATTSON:-target/release/wattson}
[ -x "$bin" ] || cargo build --release -p wattson --bin wattson >/dev/null
bin=$root/$bin
secs=${SECONDS_PER_ROW:-60}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
fixture=$root/collectors/tests/fixtures/kvm-amd-epyc-haltpoll

config() { # host db extra
  cat <<EOF
[host]
name = "$1"
sysfs = "$fixture/sys"
procfs = "$fixture/proc"
[storage]
path = "$2"
flush_interval = "1s"
[cpu]
enabled = false
[tariff]
currency = "GBP"
price_per_kwh = 0.25
timezone = "UTC"
$3
EOF
}

measured() { # config [args...]: "mean W, annual kWh, GBP/yr | status today"
  local c=$1; shift
  "$bin" --config "$c" report --format json "$@" | python3 -c '
import json, sys
m = json.load(sys.stdin).get("measured")
print("no measured history" if m is None else
      "%.2f W (+/- %.2f), %.1f kWh/yr, GBP %.2f/yr over %.3f h covered" % (
      m["mean_watts"], m.get("mean_watts_ci95") or 0, m["annual_kwh"], m["annual_cost"], m["covered_hours"]))'
}

sim() { # watts -> pty path (the simulator runs in the background)
  "$bin" meter simulate --protocol pzem004t --watts "$1" --noise 0 > "$work/sim.$1.out" 2>/dev/null &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$work/sim.$1.out" ] && break; sleep 0.1; done
  head -n1 "$work/sim.$1.out"
}

port50=$(sim 50)
printf '| setup (truth) | `wattson report`, measured section |\n|---|---|\n'
for interval in 1s 2s 500ms 5s; do
  db=$work/m$interval.db
  config "m$interval" "$db" "[[meter]]
id = \"wall\"
protocol = \"pzem004t\"
port = \"$port50\"
address = 1
interval = \"$interval\"" > "$work/m$interval.toml"
  "$bin" --config "$work/m$interval.toml" run --duration "${secs}s" 2>/dev/null
  printf '| meter `interval = "%s"` (50 W) | %s |\n' "$interval" "$(measured "$work/m$interval.toml")"
done

if command -v mosquitto >/dev/null || [ -x /usr/sbin/mosquitto ]; then
  mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$(command -v mosquitto || echo /usr/sbin/mosquitto)" -p "$mport" >/dev/null 2>&1 &
  pids+=($!)
  sleep 0.5
  mqtt="[mqtt]
url = \"mqtt://127.0.0.1:$mport\"
publish_interval = \"10s\""
  # A fleet host at 35 W publishing every 10 s, and a collector storing it.
  port35=$(sim 35)
  config collector "$work/collector.db" "$mqtt" > "$work/collector.toml"
  "$bin" --config "$work/collector.toml" collect 2>/dev/null &
  cpid=$!
  pids+=($cpid)
  sleep 1
  config fleethost "$work/fleethost.db" "$mqtt
[[meter]]
id = \"wall\"
protocol = \"pzem004t\"
port = \"$port35\"
address = 1
interval = \"1s\"" > "$work/fleethost.toml"
  "$bin" --config "$work/fleethost.toml" run --duration "${secs}s" 2>/dev/null
  sleep 2
  kill "$cpid"; wait "$cpid" 2>/dev/null || true
  printf '| fleet collector database, host at 35 W | %s (its own database: %s) |\n' \
    "$(measured "$work/collector.toml" --db "$work/collector.db" --host fleethost)" \
    "$(measured "$work/fleethost.toml")"
  # A Tasmota plug at 80 W reporting every 2 s (its messages carry no time of their own).
  config plughost "$work/plug.db" "$mqtt
[[plug]]
id = \"plug\"
kind = \"tasmota\"
topic = \"plug\"" > "$work/plug.toml"
  "$bin" --config "$work/plug.toml" run --duration "${secs}s" 2>/dev/null &
  ppid=$!
  sleep 2
  kwh=1.0
  while kill -0 "$ppid" 2>/dev/null; do
    mosquitto_pub -p "$mport" -t tele/plug/SENSOR -m "{\"ENERGY\":{\"Total\":$kwh,\"Power\":80,\"Voltage\":231}}" 2>/dev/null || true
    kwh=$(python3 -c "print(f'{$kwh + 80 * 2 / 3600 / 1000:.5f}')")
    sleep 2
  done
  printf '| Tasmota plug every 2 s (80 W) | %s |\n' "$(measured "$work/plug.toml")"
else
  echo "(mosquitto not installed: fleet and plug rows skipped)"
fi
