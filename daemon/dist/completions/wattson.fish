# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_wattson_global_optspecs
    string join \n c/config= v/verbose h/help V/version
end

function __fish_wattson_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_wattson_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_wattson_using_subcommand
    set -l cmd (__fish_wattson_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c wattson -n "__fish_wattson_needs_command" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_needs_command" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c wattson -n "__fish_wattson_needs_command" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_needs_command" -f -a "run" -d 'The daemon: collect, store and publish until stopped (systemd Type=notify)'
complete -c wattson -n "__fish_wattson_needs_command" -f -a "demo" -d 'The whole pipeline on this machine with a simulated meter: no hardware, no broker'
complete -c wattson -n "__fish_wattson_needs_command" -f -a "status" -d 'Current readings (live from the running daemon, else stored) and today\'s energy and cost'
complete -c wattson -n "__fish_wattson_needs_command" -f -a "sweep" -d 'Run workload loops against the meter and fit watts per loop, with confidence intervals'
complete -c wattson -n "__fish_wattson_needs_command" -f -a "report" -d 'Annual cost per configuration and mode, comparisons, savings and payback'
complete -c wattson -n "__fish_wattson_needs_command" -f -a "meter" -d 'Serial meter tools: probe a port, or simulate a meter on a pseudo-terminal'
complete -c wattson -n "__fish_wattson_needs_command" -f -a "config" -d 'Configuration tools'
complete -c wattson -n "__fish_wattson_needs_command" -f -a "collect" -d 'Fleet collector: store every host\'s MQTT state messages once (persistent session)'
complete -c wattson -n "__fish_wattson_needs_command" -f -a "services" -d 'CPU share, estimated watts and money per systemd service, container and session'
complete -c wattson -n "__fish_wattson_needs_command" -f -a "tariff" -d 'Price and carbon-intensity series: import Octopus Agile, day-ahead CSV, carbon data'
complete -c wattson -n "__fish_wattson_needs_command" -f -a "candidate" -d 'Other machines to price on this one\'s measured load: SPECpower results or by hand'
complete -c wattson -n "__fish_wattson_needs_command" -f -a "calibration" -d 'Model the wall from this host\'s own signals while the meter is in, to estimate it (with its interval) once the meter has moved on; export it to powercalc, Prometheus or another host of the same hardware'
complete -c wattson -n "__fish_wattson_needs_command" -f -a "idle" -d 'Why idle draws what it does: package and core C-states and the power settings that keep them shallow; --measure finds what each setting saves at the wall'
complete -c wattson -n "__fish_wattson_needs_command" -f -a "help" -d 'Print the help of wattson or of the given subcommand(s)'
complete -c wattson -n "__fish_wattson_using_subcommand run" -l db -d 'Store into this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand run" -l duration -d 'Stop after this long (e.g. `60s`) instead of running until SIGTERM' -r
complete -c wattson -n "__fish_wattson_using_subcommand run" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand run" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand run" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand run" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand demo" -l duration -d 'How long to run the whole demo, 20 s or more (kept to within 5 %)' -r
complete -c wattson -n "__fish_wattson_using_subcommand demo" -l db -d 'Keep the database here instead of a temporary file' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand demo" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand demo" -l no-sweep -d 'Skip the short workload sweep'
complete -c wattson -n "__fish_wattson_using_subcommand demo" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand demo" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand demo" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand status" -l db -d 'Read this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand status" -l host -d 'Show this host\'s figures (a fleet collector\'s database holds several) [default: `[host] name`]' -r
complete -c wattson -n "__fish_wattson_using_subcommand status" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand status" -l json -d 'Print JSON instead of a table'
complete -c wattson -n "__fish_wattson_using_subcommand status" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand status" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand status" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -l name -d 'Name of the configuration to store the results under (e.g. "basket, powersave"); required, except with --list or --show' -r
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -l levels -d 'Busy loops per level, comma-separated, each from 0 (idle) to the logical CPUs [default: 0, 1, ... up to the logical CPUs]' -r
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -l kinds -d 'Loop kinds: spin (compute-bound), memory (memory-bound), pause (spin-wait with the pause hint)' -r
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -l governors -d 'Repeat the sweep under each cpufreq governor (root only); originals are restored' -r
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -l meter -d 'Which [[meter]] to read (its id) [default: the first]' -r
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -l max-level-time -d 'Time cap of each level, settling included (measuring stops at the cap)' -r
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -l ci-watts -d 'Target half-width of each level\'s 95 % interval, W (the larger of this and --ci-percent)' -r
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -l ci-percent -d 'Target half-width of each level\'s 95 % interval, percent of the mean' -r
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -l idle-wait -d 'How long the idle level waits for other load to go away before measuring anyway' -r
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -l min-samples -d 'Readings before a level\'s interval is trusted' -r
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -l show -d 'Show one stored sweep' -r
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -l db -d 'Database to store into [default: [storage] path]; while a daemon runs for it, the daemon stores the sweep' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -l regression-check -d 'Compare idle with the baseline (the newest complete sweep of --name that was not a regression) and store the verdict for the daemon and `wattson report`'
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -l list -d 'List the stored sweeps'
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -l json -d 'Print --list/--show as JSON'
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c wattson -n "__fish_wattson_using_subcommand sweep" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand report" -l format -d 'Output format' -r -f -a "table\t'Aligned text for a terminal'
markdown\t'A Markdown document with the same table'
csv\t'One row per configuration and mode, with a header'
json\t'One JSON object (the documented contract)'
html\t'One self-contained HTML file with SVG charts and the JSON embedded'"
complete -c wattson -n "__fish_wattson_using_subcommand report" -l out -d 'Write the report to this file instead of stdout' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand report" -l configs -d 'Configurations to show, in order, separated by commas (names may be shortened to a unique prefix); the first is the baseline the others are compared with [default: every configuration, the costliest first]' -r
complete -c wattson -n "__fish_wattson_using_subcommand report" -l since -d 'Start of the measured window: a date (YYYY-MM-DD), a moment (RFC 3339, e.g. 2026-12-04T18:30:00Z) or a duration such as 30d (the last 30 days)' -r
complete -c wattson -n "__fish_wattson_using_subcommand report" -l until -d 'End of the measured window: a date (YYYY-MM-DD, to the end of that day), a moment (RFC 3339) or a duration such as 1d (up to a day ago) [default: now]' -r
complete -c wattson -n "__fish_wattson_using_subcommand report" -l mode -d 'Compare at this mode (e.g. "idle", "2 loops") instead of idle or the measured duty cycle' -r
complete -c wattson -n "__fish_wattson_using_subcommand report" -l upgrade-cost -d 'What the upgrade costs, in the tariff\'s currency: gives the payback time (overrides each target\'s `upgrade_cost`)' -r
complete -c wattson -n "__fish_wattson_using_subcommand report" -l co2 -d 'Grid carbon intensity, g CO2 per kWh: adds CO2 per year and CO2 saved' -r
complete -c wattson -n "__fish_wattson_using_subcommand report" -l tariffs -d 'Price the measured energy under each of these tariffs, side by side, and say what the cheapest saves per year: `current` (what prices the ledger), `tariff` (the configured [tariff] alone), an [[tariff.alternative]] name, or an imported series\' name (`wattson tariff list`), separated by commas' -r
complete -c wattson -n "__fish_wattson_using_subcommand report" -l db -d 'Read this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand report" -l prometheus -d 'Read the host\'s history from a Prometheus-compatible engine\'s query API instead of a database: the series remote write sent there (`[prometheus] remote_write`), at this base URL (e.g. http://prometheus.lan:9090), priced as a database\'s would be' -r
complete -c wattson -n "__fish_wattson_using_subcommand report" -l host -d 'The host whose measured history to report (a fleet collector\'s database holds several; with --prometheus, several separated by commas, one report each) [default: `[host] name`]' -r
complete -c wattson -n "__fish_wattson_using_subcommand report" -l candidates -d 'Candidate machines (`wattson candidate`) to price on this machine\'s load, in this order, separated by commas [default: the cheapest that carry the load]' -r
complete -c wattson -n "__fish_wattson_using_subcommand report" -l candidates-top -d 'How many of the cheapest candidates to show when --candidates names none' -r
complete -c wattson -n "__fish_wattson_using_subcommand report" -l this-ssj-ops -d 'This machine\'s own ssj_ops at 100 % (a published SPECpower result of the same model): a candidate with its ssj_ops published and no --perf-ratio gets its ssj_ops over this as its perf ratio' -r
complete -c wattson -n "__fish_wattson_using_subcommand report" -l schedule -d 'Price each configuration\'s modes on a week\'s schedule, hour by hour at the tariff in force: entries separated by `;`, each MODE [DAYS] [HH:MM-HH:MM], one with neither days nor times being the mode at all other times, later entries winning, e.g. "standby 00:00-07:00; idle; 2 loops sun 02:00-03:00"' -r
complete -c wattson -n "__fish_wattson_using_subcommand report" -l standby-watts -d 'This machine\'s power asleep at the wall, W, for what sleeping when idle would save [default: `[sleep] standby_watts`, else the `standby` mode of this host\'s `[[config]]`]. The thresholds of an hour idle enough to sleep are `[sleep]`\'s' -r
complete -c wattson -n "__fish_wattson_using_subcommand report" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand report" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand report" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c wattson -n "__fish_wattson_using_subcommand report" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand meter; and not __fish_seen_subcommand_from probe simulate" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand meter; and not __fish_seen_subcommand_from probe simulate" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand meter; and not __fish_seen_subcommand_from probe simulate" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand meter; and not __fish_seen_subcommand_from probe simulate" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand meter; and not __fish_seen_subcommand_from probe simulate" -f -a "probe" -d 'Identify which supported meter answers on PORT'
complete -c wattson -n "__fish_wattson_using_subcommand meter; and not __fish_seen_subcommand_from probe simulate" -f -a "simulate" -d 'Simulate a meter on a new pseudo-terminal and print its path'
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from probe" -l timeout -d 'How long to wait for each protocol\'s answer' -r
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from probe" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from probe" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from probe" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from probe" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l protocol -d 'Protocol to simulate' -r -f -a "pzem004t\t''
pzem017\t''
sdm120\t''
sdm230\t''
sdm630\t''
wattsup\t''
cse7766\t''
hlw8032\t''
line\t''"
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l watts -d 'Watts with no load (or constant watts without --follow-cpu)' -r
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l follow-pid -d 'With --follow-cpu, follow only this process\'s CPU time (all its threads, from /proc/PID/stat) rather than the whole machine\'s, so other load does not leak in' -r
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l follow-threads -d 'With --follow-demand, count only the process\'s threads whose name starts with this, e.g. `wattson-spin` for a sweep\'s spin loops' -r
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l per-cpu -d 'Extra watts per fully busy CPU with --follow-cpu' -r
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l noise -d 'Standard deviation of added noise, W' -r
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l ramp -d 'Time constant of the ramp to a new level, s' -r
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l curvature -d 'Extra watts per busy CPU beyond the first (negative: later loops cheaper)' -r
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l address -d 'Modbus addresses to answer on (comma-separated), e.g. 1,2,3 for three meters on one bus' -r
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l duration -d 'Stop after this long instead of running until interrupted' -r
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l effect -d 'Watts added while a file holds a value, FILE=VALUE:W (repeatable): e.g. /sys/module/pcie_aspm/parameters/policy=powersave:-3 for a machine that draws 3 W less with ASPM on, to try `wattson idle --measure` against a known answer' -r
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l fault -d 'Play a fault over the replies or records, KIND@START+LENGTH from when the simulator starts (repeatable): exception:CODE (a Modbus exception reply in place of every reply), silence, wrong-address, corrupt, truncated, overlong, garbage; e.g. --fault exception:2@10s+3s. To try how wattson rides out a misbehaving meter' -r
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l fault-cycle -d 'With --fault: repeat the faults every this long (a script of one cycle)' -r
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l energy-wh -d 'Start the meter\'s energy counter at this many Wh, as a meter that has counted before: start a simulator again with its counter moved on by the energy of a time away (e.g. 28 for 7 h at 4 W) to try how wattson measures standby at the wall' -r
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l seed -d 'Random seed for the noise' -r
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l follow-cpu -d 'Follow this machine\'s CPU load: watts = --watts + --per-cpu x busy CPUs'
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -l follow-demand -d 'With --follow-pid, count the time its threads waited for a CPU as busy too: the CPUs the process asks for, so its loops read as whole CPUs on a machine shared with other work (benchmarks of the sweep\'s statistics on a loaded machine)'
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand meter; and __fish_seen_subcommand_from simulate" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand config; and not __fish_seen_subcommand_from check" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand config; and not __fish_seen_subcommand_from check" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand config; and not __fish_seen_subcommand_from check" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand config; and not __fish_seen_subcommand_from check" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand config; and not __fish_seen_subcommand_from check" -f -a "check" -d 'Validate the configuration and print the effective config (secrets redacted)'
complete -c wattson -n "__fish_wattson_using_subcommand config; and __fish_seen_subcommand_from check" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand config; and __fish_seen_subcommand_from check" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand config; and __fish_seen_subcommand_from check" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand config; and __fish_seen_subcommand_from check" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand collect" -l client-id -d 'MQTT client id; fixed so the broker keeps this collector\'s session (and queues messages) while it is down [default: wattson-collect-<host>]' -r
complete -c wattson -n "__fish_wattson_using_subcommand collect" -l jsonl -d 'Append samples as JSON lines to this file (`-` for standard output) instead of storing them in the database' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand collect" -l db -d 'Store into this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand collect" -l max-hosts -d 'Most hosts taken (those already in the database first); messages of further hosts are acknowledged, counted and logged as refused' -r
complete -c wattson -n "__fish_wattson_using_subcommand collect" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand collect" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand collect" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand collect" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand services" -l db -d 'Read this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand services" -l host -d 'Show this host\'s groups [default: `[host] name`]' -r
complete -c wattson -n "__fish_wattson_using_subcommand services" -l days -d 'How many days back the figures look, 1 to the raw retention (hours are kept that long)' -r
complete -c wattson -n "__fish_wattson_using_subcommand services" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand services" -l json -d 'Print JSON instead of a table'
complete -c wattson -n "__fish_wattson_using_subcommand services" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand services" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c wattson -n "__fish_wattson_using_subcommand services" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and not __fish_seen_subcommand_from import list remove" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and not __fish_seen_subcommand_from import list remove" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and not __fish_seen_subcommand_from import list remove" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and not __fish_seen_subcommand_from import list remove" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and not __fish_seen_subcommand_from import list remove" -f -a "import" -d 'Import price or carbon-intensity slots from files (all or nothing)'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and not __fish_seen_subcommand_from import list remove" -f -a "list" -d 'The stored series: kind, unit, slots, first and last, mean, whether it prices the ledger'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and not __fish_seen_subcommand_from import list remove" -f -a "remove" -d 'Delete a series and its slots'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from import" -l format -d 'The file format [default: from the contents]' -r -f -a "auto\t'Decide from the file\'s contents'
octopus\t'Octopus Energy unit rates (JSON, pence per kWh)'
entsoe\t'ENTSO-E transparency platform day-ahead prices (CSV, per MWh)'
nordpool\t'Nord Pool day-ahead prices (CSV, per MWh)'
csv\t'start,end,price_per_kwh'
carbon-json\t'GB National Grid carbon intensity API (JSON, g CO2 per kWh)'
carbon-csv\t'start,end,g_co2_per_kwh'"
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from import" -l name -d 'The series\' name: imports under one name replace each other where they overlap [default: octopus, entsoe, nordpool, imported, carbon by format]' -r
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from import" -l currency -d 'The currency of a plain CSV\'s prices [default: [tariff] currency]' -r
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from import" -l timezone -d 'The time zone of a day-ahead CSV whose header names none (e.g. Europe/Oslo)' -r
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from import" -l column -d 'The price column of a day-ahead CSV with several areas (e.g. "SE3 (EUR)")' -r
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from import" -l max-price -d 'Refuse prices beyond this, either sign, per kWh [default: [tariff] max_price_per_kwh]' -r
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from import" -l db -d 'Write into this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from import" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from import" -l exc-vat -d 'Octopus: the price without VAT (value_exc_vat) [default: with VAT, value_inc_vat]'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from import" -l compare-only -d 'Keep the series to compare against (`report --tariffs`) without pricing the ledger\'s energy by it'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from import" -l json -d 'Print the result as JSON'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from import" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from import" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from import" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from list" -l db -d 'Read this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from list" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from list" -l json -d 'Print JSON'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from list" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from remove" -l db -d 'Write into this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from remove" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from remove" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from remove" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand tariff; and __fish_seen_subcommand_from remove" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and not __fish_seen_subcommand_from import add from-sweep set list show remove" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and not __fish_seen_subcommand_from import add from-sweep set list show remove" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and not __fish_seen_subcommand_from import add from-sweep set list show remove" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and not __fish_seen_subcommand_from import add from-sweep set list show remove" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and not __fish_seen_subcommand_from import add from-sweep set list show remove" -f -a "import" -d 'Import SPECpower_ssj2008 results (CSV, one row per result) as candidates'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and not __fish_seen_subcommand_from import add from-sweep set list show remove" -f -a "add" -d 'Enter a machine by hand: its watts at active idle and at shares of its maximum throughput (100 % required; straight lines between the points)'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and not __fish_seen_subcommand_from import add from-sweep set list show remove" -f -a "from-sweep" -d 'Take a configuration wattson swept, on this host or another, as a candidate'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and not __fish_seen_subcommand_from import add from-sweep set list show remove" -f -a "set" -d 'Set what a stored candidate costs to buy, or its throughput against this machine'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and not __fish_seen_subcommand_from import add from-sweep set list show remove" -f -a "list" -d 'The stored candidates: curve, where it came from, price'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and not __fish_seen_subcommand_from import add from-sweep set list show remove" -f -a "show" -d 'One candidate: every curve point, and a hand table\'s stated figures checked'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and not __fish_seen_subcommand_from import add from-sweep set list show remove" -f -a "remove" -d 'Delete a candidate'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from import" -l db -d 'Write into this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from import" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from import" -l json -d 'Print the result as JSON'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from import" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from import" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from import" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from add" -l idle -d 'Watts at active idle' -r
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from add" -l at -d 'Watts at a share of maximum throughput, `LOAD%=WATTS`; repeat it; 100% is required' -r
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from add" -l price -d 'What buying it costs, in the tariff\'s currency' -r
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from add" -l perf-ratio -d 'Its throughput over this machine\'s (1.8: it does the same work at 1/1.8 of its maximum) [default: 1, assumed]' -r
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from add" -l stated-annual-cost -d 'A hand table\'s own annual cost of this machine at idle, to check its arithmetic' -r
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from add" -l stated-price -d 'The price per kWh that table says it used' -r
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from add" -l db -d 'Write into this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from add" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from add" -l json -d 'Print the candidate as JSON'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from add" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from add" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from from-sweep" -l configuration -d 'The swept configuration, as `wattson sweep --list` names it' -r
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from from-sweep" -l from -d 'The database that holds the sweep: another host\'s store (a copy of its file) or this host\'s [default: the database written into]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from from-sweep" -l kind -d 'The loop kind whose levels make the curve [default: spin, or the one it was swept with]' -r
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from from-sweep" -l against -d 'This machine\'s sweep to measure the throughput ratio against [default: the newest complete sweep in the database written into with the same loop kind at every CPU]' -r
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from from-sweep" -l price -d 'What buying it costs, in the tariff\'s currency' -r
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from from-sweep" -l perf-ratio -d 'Its throughput over this machine\'s, instead of the one the loop rates give' -r
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from from-sweep" -l db -d 'Write into this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from from-sweep" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from from-sweep" -l json -d 'Print the candidate as JSON'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from from-sweep" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from from-sweep" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from from-sweep" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from set" -l price -d 'What buying it costs, in the tariff\'s currency' -r
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from set" -l perf-ratio -d 'Its throughput over this machine\'s' -r
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from set" -l db -d 'Write into this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from set" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from set" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from set" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from set" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from list" -l db -d 'Read this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from list" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from list" -l json -d 'Print JSON'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from list" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from show" -l db -d 'Read this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from show" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from show" -l json -d 'Print JSON'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from show" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from show" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from remove" -l db -d 'Write into this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from remove" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from remove" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from remove" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand candidate; and __fish_seen_subcommand_from remove" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and not __fish_seen_subcommand_from fit show estimate export import" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and not __fish_seen_subcommand_from fit show estimate export import" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and not __fish_seen_subcommand_from fit show estimate export import" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and not __fish_seen_subcommand_from fit show estimate export import" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and not __fish_seen_subcommand_from fit show estimate export import" -f -a "fit" -d 'Fit the wall meter\'s watts against the signals this host stores, and keep the best'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and not __fish_seen_subcommand_from fit show estimate export import" -f -a "show" -d 'The calibration the estimate uses (the newest fitted on ordinary running, else a sweep\'s fit): its model, what it saw, its error, where it came from'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and not __fish_seen_subcommand_from fit show estimate export import" -f -a "estimate" -d 'Estimate the wall energy of a stretch of history from the calibration'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and not __fish_seen_subcommand_from fit show estimate export import" -f -a "export" -d 'Write the calibration for another tool, or another host of the same hardware'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and not __fish_seen_subcommand_from fit show estimate export import" -f -a "import" -d 'Take a calibration file exported on another host of the same hardware (same CPU model and count, memory within 5 %) as this host\'s, marked as borrowed'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from fit" -l since -d 'Start of the history fitted: a date, a moment (RFC 3339) or a duration such as 7d [default: 30 days ago]' -r
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from fit" -l until -d 'End of the history fitted [default: now]' -r
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from fit" -l holdout -d 'The later share of the history scored, not fitted' -r
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from fit" -l feature -d 'Only these signals (`source/metric/channel`, e.g. `cpu/cpu_busy/all`, `rapl/power/package-0`; repeat for several) [default: every one stored]' -r
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from fit" -l wall -d 'The wall meter\'s source, e.g. `meter:wall` [default: the one with the most minutes]' -r
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from fit" -l db -d 'Read and write this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from fit" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from fit" -l json -d 'Print the stored calibration as JSON'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from fit" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from fit" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from fit" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from show" -l db -d 'Read this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from show" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from show" -l json -d 'Print JSON'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from show" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from show" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from estimate" -l since -d 'Start of the stretch estimated [default: a day ago]' -r
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from estimate" -l until -d 'End of the stretch estimated [default: now]' -r
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from estimate" -l db -d 'Read this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from estimate" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from estimate" -l json -d 'Print JSON'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from estimate" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from estimate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from estimate" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from export" -l format -d 'What to write' -r -f -a "powercalc\t''
prometheus\t''
file\t''"
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from export" -l db -d 'Read this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from export" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from export" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from export" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from export" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from import" -l db -d 'Write into this database instead of `[storage] path`' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from import" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from import" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from import" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand calibration; and __fish_seen_subcommand_from import" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand idle" -l db -d 'Database to read history from and store measurements in [default: [storage] path]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand idle" -l sample -d 'Sample who wakes the CPUs for this long, and the C-states too without an hour of history in the database (0: no live sample)' -r
complete -c wattson -n "__fish_wattson_using_subcommand idle" -l top -d 'How many services, processes and interrupt lines "Who wakes the CPUs" lists' -r
complete -c wattson -n "__fish_wattson_using_subcommand idle" -l watch -d 'With --apply: how long to watch the error counters afterwards (0: not at all). Ctrl-C stops watching; what was applied stays' -r
complete -c wattson -n "__fish_wattson_using_subcommand idle" -l tmpfiles-dir -d 'With --apply or --revert: the directory of its tmpfiles.d file (wattson-idle.conf)' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand idle" -l only -d 'With --measure or --apply: only these settings (comma-separated ids: pcie_aspm, sata_alpm, runtime_pm_pci, runtime_pm_ata, runtime_pm_usb, nmi_watchdog, dirty_writeback, audio_power_save, epp, cpufreq_governor, turbo). With --measure also disk_standby:DISK (or disk_standby, every such disk): what a spinning disk costs, the kernel letting it stop against keeping it spinning; measured only when named here' -r
complete -c wattson -n "__fish_wattson_using_subcommand idle" -l skip -d 'With --measure: leave these settings alone (ids as for --only)' -r
complete -c wattson -n "__fish_wattson_using_subcommand idle" -l meter -d 'With --measure: which [[meter]] to read (its id) [default: the first]' -r
complete -c wattson -n "__fish_wattson_using_subcommand idle" -l phase -d 'With --measure: measuring time of each phase, after the power settles' -r
complete -c wattson -n "__fish_wattson_using_subcommand idle" -l phases -d 'With --measure: phases per setting, odd, 3 or more (A B A, A B A B A, ...)' -r
complete -c wattson -n "__fish_wattson_using_subcommand idle" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand idle" -l json -d 'Print JSON instead of text (without --measure; `wattson idle --json` afterwards lists what was measured)'
complete -c wattson -n "__fish_wattson_using_subcommand idle" -l measure -d 'Measure what each setting saves at the wall (root, with a [[meter]]): each one changed and put back in turn, A/B/A/B/A/B/A against idle as it was, then restored; stored as configurations ("idle as found", "idle with <setting>") that `wattson report` compares'
complete -c wattson -n "__fish_wattson_using_subcommand idle" -l restore -d 'Restore the settings an interrupted `--measure` left changed, as the database records them. Every command does this by itself, except as root from a database owned by another user; this asks for it. Only files of wattson\'s settings catalogue under [host] sysfs and procfs are written, with values their settings take'
complete -c wattson -n "__fish_wattson_using_subcommand idle" -l apply -d 'Keep the settings --measure found to save at the wall (root): write them into one file wattson owns, a tmpfiles.d file that systemd applies at every boot, print it, apply it now, then watch the error counters such settings can raise (PCIe AER, NIC errors and link drops, disk I/O errors) for --watch and put back any setting whose counters rise. USB input devices and devices whose driver reports runtime PM unsupported are never touched'
complete -c wattson -n "__fish_wattson_using_subcommand idle" -l revert -d 'Undo --apply: put back every value it changed, as found, and take its lines out of its file (lines added below them are kept; the file goes when nothing else is in it)'
complete -c wattson -n "__fish_wattson_using_subcommand idle" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand idle" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand idle" -s V -l version -d 'Print version'
complete -c wattson -n "__fish_wattson_using_subcommand help" -s c -l config -d 'Configuration file [default: $WATTSON_CONFIG, else /etc/wattson/wattson.toml if it exists, else built-in defaults]' -r -F
complete -c wattson -n "__fish_wattson_using_subcommand help" -s v -l verbose -d 'Log debug detail. Without it, commands log only warnings; the daemon, the fleet collector, a sweep and a simulated meter also log what they do (RUST_LOG overrides)'
complete -c wattson -n "__fish_wattson_using_subcommand help" -s h -l help -d 'Print help'
complete -c wattson -n "__fish_wattson_using_subcommand help" -s V -l version -d 'Print version'
