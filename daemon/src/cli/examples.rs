//! The examples each `--help` ends with (and the man pages' EXAMPLES sections).

pub const WATTSON: &str = "\
Examples:
  wattson demo                                  # the whole pipeline, no hardware needed
  wattson --config /etc/wattson/wattson.toml config check
  wattson status
  wattson report --format html --out report.html
  wattson help sweep                            # the help of one subcommand";

pub const RUN: &str = "\
Examples:
  wattson run                                   # until SIGTERM or Ctrl-C (systemd: wattson.service)
  wattson run --config ./wattson.toml --db /tmp/test.db --duration 60s";

pub const DEMO: &str = "\
Examples:
  wattson demo                                  # 90 s: collect, a short sweep, a cost summary
  wattson demo --duration 3m --db demo.db       # keep the database, then: wattson report --db demo.db
  wattson demo --no-sweep --duration 30s";

pub const STATUS: &str = "\
Examples:
  wattson status
  wattson status --json | jq .cost
  wattson status --db /var/lib/wattson/wattson.db";

pub const SERVICES: &str = "\
Examples:
  wattson services
  wattson services --days 1
  wattson services --json | jq '.groups[] | {name, watts_now, cost}'";

pub const SWEEP: &str = "\
Examples:
  wattson sweep --name \"basket, powersave\"      # idle, then 1 .. N loops of the spin kind
  wattson sweep --name basket --levels 0,1,2,4 --kinds spin,memory,pause
  sudo wattson sweep --name basket --governors powersave,performance
  wattson sweep --name monthly --levels 0,1 --regression-check
  wattson sweep --list
  wattson sweep --show \"basket, powersave\" --json";

pub const REPORT: &str = "\
Examples:
  wattson report                                # aligned table on the terminal
  wattson report --upgrade-cost 300 --co2 200   # payback time and CO2 saved
  wattson report --configs \"athlon,2x opteron\"  # these, in this order (prefixes will do)
  wattson report --mode \"2 loops\"
  wattson report --since 30d --format html --out report.html
  wattson report --tariffs current,agile,economy7   # the measured energy under each tariff";

pub const METER: &str = "\
Examples:
  wattson meter probe /dev/ttyUSB0
  wattson meter simulate --protocol sdm630 --watts 60";

pub const METER_PROBE: &str = "\
Examples:
  wattson meter probe /dev/ttyUSB0              # which meter answers, its address and a reading
  wattson meter probe /dev/wattson-meter --timeout 3s";

pub const METER_SIMULATE: &str = "\
Examples:
  wattson meter simulate --protocol sdm630 --watts 60            # prints a pty path: use it as `port`
  wattson meter simulate --protocol pzem004t --follow-cpu --address 1,2,3
  wattson meter simulate --protocol cse7766 --duration 10m";

pub const CONFIG_CHECK: &str = "\
Examples:
  wattson config check
  wattson --config ./wattson.toml config check  # exit 78 and the key and line when it is wrong";

pub const COLLECT: &str = "\
Examples:
  wattson collect --db fleet.db                 # every host's state from [mqtt]'s broker
  wattson collect --jsonl - | head";

pub const TARIFF: &str = "\
Examples:
  wattson tariff import agile.json              # Octopus unit rates, priced per half-hour
  wattson tariff import day-ahead.csv --name nordpool --compare-only
  wattson tariff list
  wattson report --tariffs current,agile,economy7";

pub const TARIFF_IMPORT: &str = "\
Examples:
  curl -o agile.json 'https://api.octopus.energy/v1/products/AGILE-24-10-01/electricity-tariffs/E-1R-AGILE-24-10-01-C/standard-unit-rates/?period_from=2026-11-29T00:00Z&period_to=2026-11-30T00:00Z'
  wattson tariff import agile.json              # inc VAT, series \"octopus\"
  wattson tariff import page1.json page2.json --exc-vat --name agile
  wattson tariff import entsoe.csv --name de-lu --compare-only   # EUR/MWh, converted to EUR/kWh
  wattson tariff import prices.csv --format csv --currency EUR   # start,end,price_per_kwh
  wattson tariff import carbon.json             # GB carbon intensity API: CO2 per slot";

pub const TARIFF_LIST: &str = "\
Examples:
  wattson tariff list
  wattson tariff list --json | jq '.[].source'";

pub const TARIFF_REMOVE: &str = "\
Examples:
  wattson tariff remove agile";
pub const CANDIDATE: &str = "\
Examples:
  wattson candidate import specpower.csv        # SPECpower results, one candidate per row
  wattson candidate add new-box --idle 62 --at 50%=110 --at 100%=180 --price 400 --perf-ratio 1.8
  wattson candidate from-sweep mini --configuration mini --from mini.db --price 350
  wattson candidate list
  wattson report --candidates new-box";

pub const CALIBRATION: &str = "\
Examples:
  wattson calibration fit                       # the last 30 days with the meter in
  wattson calibration show
  wattson calibration estimate --since 7d       # once the meter has moved on
  wattson calibration export --format powercalc > powercalc-wattson.yaml
  wattson calibration export --format file > nas.calibration.json";

pub const CALIBRATION_FIT: &str = "\
Examples:
  wattson calibration fit
  wattson calibration fit --since 2026-12-01 --until 2026-12-03 --holdout 0.25
  wattson calibration fit --feature cpu/cpu_busy/all       # one powercalc can read
  wattson calibration fit --json | jq .interval_pct";

pub const CALIBRATION_SHOW: &str = "\
Examples:
  wattson calibration show
  wattson calibration show --json | jq .model";

pub const CALIBRATION_ESTIMATE: &str = "\
Examples:
  wattson calibration estimate                  # the last day
  wattson calibration estimate --since 2026-12-04 --until 2026-12-05
  wattson calibration estimate --since 7d --json | jq '.energy_wh, .interval_wh'";

pub const CALIBRATION_EXPORT: &str = "\
Examples:
  wattson calibration export --format powercalc > /config/packages/wattson-powercalc.yaml
  wattson calibration export --format prometheus > /etc/prometheus/rules/wattson-nas.yml
  wattson calibration export --format file > nas.calibration.json";

pub const CALIBRATION_IMPORT: &str = "\
Examples:
  wattson calibration import nas.calibration.json   # from a host of the same hardware";

pub const CANDIDATE_IMPORT: &str = "\
Examples:
  wattson candidate import specpower.csv        # the published curves (11 points)
  wattson candidate import two-point.csv        # watts at 100 % and active idle: interpolated
  wattson candidate import a.csv b.csv --json";

pub const CANDIDATE_ADD: &str = "\
Examples:
  wattson candidate add new-box --idle 62 --at 50%=110 --at 100%=180 --price 400 --perf-ratio 1.8
  wattson candidate add athlon --idle 78 --at 100%=111 --price 300
  wattson candidate add seed --idle 240 --at 100%=240 --stated-annual-cost 137 --stated-price 0.09";

pub const CANDIDATE_FROM_SWEEP: &str = "\
Examples:
  wattson candidate from-sweep old-nas --configuration nas --from nas.db --price 0
  wattson candidate from-sweep powersave --configuration \"basket, powersave\"   # this host, set up so
  wattson candidate from-sweep mini --configuration mini --from mini.db --kind memory --price 350";

pub const CANDIDATE_SET: &str = "\
Examples:
  wattson candidate set \"Acme Microserver M10\" --price 650 --perf-ratio 1.4";

pub const CANDIDATE_LIST: &str = "\
Examples:
  wattson candidate list
  wattson candidate list --json | jq '.[].name'";

pub const CANDIDATE_SHOW: &str = "\
Examples:
  wattson candidate show new-box
  wattson candidate show seed --json | jq .stated";

pub const CANDIDATE_REMOVE: &str = "\
Examples:
  wattson candidate remove new-box";

pub const IDLE: &str = "\
Examples:
  wattson idle                                  # package and core C-states, every setting, in words
  wattson idle --json | jq .findings
  sudo wattson idle --measure                   # what each setting saves at the wall, then puts it back
  sudo wattson idle --measure --only pcie_aspm,sata_alpm
  sudo wattson idle --measure --skip runtime_pm_usb --phase 40s";

pub const HELP: &str = "\
Examples:
  wattson help
  wattson help meter probe";
