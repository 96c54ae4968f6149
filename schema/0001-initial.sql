-- wattson schema, version 1.
-- Append-only: never edit a released migration; add NNNN-name.sql instead.
-- Times are UTC milliseconds since the Unix epoch unless a column says otherwise.
-- Pragmas (WAL, synchronous, foreign_keys, busy_timeout, application_id) are set by the
-- daemon per connection, outside migrations.

-- One measured quantity: a metric of one channel of one source on one host.
-- `unit` is the symbol of the metric's unit (W, V, A, Hz, Wh, share, MHz, '' for ratios).
-- `rollup` is 1 when hourly rollups are kept, `minute_rollup` 1 when per-minute
-- rollups are kept as well (power series, for energy at minute precision).
CREATE TABLE series (
    id             INTEGER PRIMARY KEY,
    host           TEXT    NOT NULL,
    source         TEXT    NOT NULL,
    metric         TEXT    NOT NULL,
    channel        TEXT    NOT NULL,
    unit           TEXT    NOT NULL,
    rollup         INTEGER NOT NULL CHECK (rollup IN (0, 1)),
    minute_rollup  INTEGER NOT NULL CHECK (minute_rollup IN (0, 1)),
    UNIQUE (host, source, metric, channel, unit)
) STRICT;

-- Closed raw chunks: the samples of one series in one fixed period (`start_ms` is a
-- multiple of the chunk period), encoded by the daemon's chunk codec (timestamps as
-- delta-of-delta, values quantised to the metric's resolution as deltas, bit-packed).
-- A rowid table so that chunks, written once when they close, append to the end of the
-- b-tree and fill its pages.
CREATE TABLE raw_chunk (
    id          INTEGER PRIMARY KEY,
    series_id   INTEGER NOT NULL REFERENCES series (id),
    start_ms    INTEGER NOT NULL,
    n           INTEGER NOT NULL,
    last_ts_ms  INTEGER NOT NULL,
    last_value  REAL    NOT NULL,
    data        BLOB    NOT NULL
) STRICT;
CREATE UNIQUE INDEX raw_chunk_series_start ON raw_chunk (series_id, start_ms);

-- The open (still filling) chunk of each series, rewritten at every flush. Readers take
-- the union of raw_chunk and raw_open; a (series, start) pair is never in both.
CREATE TABLE raw_open (
    series_id   INTEGER PRIMARY KEY REFERENCES series (id),
    start_ms    INTEGER NOT NULL,
    n           INTEGER NOT NULL,
    last_ts_ms  INTEGER NOT NULL,
    last_value  REAL    NOT NULL,
    data        BLOB    NOT NULL
) STRICT;

-- Hourly rollups, kept forever. `energy_wh` is the trapezoidal integral of power over the
-- hour (power series only), never across a gap. `minutes` holds the per-minute rollups
-- of the hour for series with minute_rollup = 1, encoded by the chunk codec as columns
-- (minute index, n, mean, min, max quantised to the metric's resolution; energy in mWh).
CREATE TABLE rollup_hour (
    id          INTEGER PRIMARY KEY,
    series_id   INTEGER NOT NULL REFERENCES series (id),
    hour_ms     INTEGER NOT NULL,
    n           INTEGER NOT NULL,
    mean        REAL    NOT NULL,
    min         REAL    NOT NULL,
    max         REAL    NOT NULL,
    energy_wh   REAL,
    minutes     BLOB
) STRICT;
CREATE UNIQUE INDEX rollup_hour_series_hour ON rollup_hour (series_id, hour_ms);

-- Periods without data from a source (meter unplugged, daemon stopped). Energy is never
-- integrated across them.
CREATE TABLE gap (
    id        INTEGER PRIMARY KEY,
    host      TEXT    NOT NULL,
    source    TEXT    NOT NULL,
    start_ms  INTEGER NOT NULL,
    end_ms    INTEGER NOT NULL CHECK (end_ms >= start_ms),
    reason    TEXT    NOT NULL
) STRICT;
CREATE INDEX gap_host_end ON gap (host, end_ms);

-- A named configuration: a host's hardware/software fingerprint plus a user label.
CREATE TABLE configuration (
    id           INTEGER PRIMARY KEY,
    name         TEXT    NOT NULL UNIQUE,
    kind         TEXT    NOT NULL CHECK (kind IN ('sweep', 'manual')),
    host         TEXT,
    fingerprint  TEXT    CHECK (fingerprint IS NULL OR json_valid(fingerprint)),
    label        TEXT,
    created_ms   INTEGER NOT NULL
) STRICT;

-- One sweep: workload levels run against a meter. `kinds` is a comma-separated list of
-- loop kinds (spin, memory, pause); `settings` and `fit` are JSON.
CREATE TABLE sweep_run (
    id                INTEGER PRIMARY KEY,
    configuration_id  INTEGER NOT NULL REFERENCES configuration (id) ON DELETE CASCADE,
    started_ms        INTEGER NOT NULL,
    ended_ms          INTEGER,
    status            TEXT    NOT NULL CHECK (status IN ('complete', 'partial')),
    kinds             TEXT    NOT NULL,
    meter             TEXT    NOT NULL,
    settings          TEXT    CHECK (settings IS NULL OR json_valid(settings)),
    fit               TEXT    CHECK (fit IS NULL OR json_valid(fit))
) STRICT;
CREATE INDEX sweep_run_configuration ON sweep_run (configuration_id);

-- Statistics of one level of a sweep (watts W, frequency MHz, busy share 0..1).
CREATE TABLE sweep_level (
    run_id         INTEGER NOT NULL REFERENCES sweep_run (id) ON DELETE CASCADE,
    kind           TEXT    NOT NULL,
    loops          INTEGER NOT NULL,
    started_ms     INTEGER NOT NULL,
    ended_ms       INTEGER NOT NULL,
    n              INTEGER NOT NULL,
    mean_w         REAL    NOT NULL,
    sd_w           REAL,
    ci95_w         REAL,
    min_w          REAL,
    max_w          REAL,
    mean_mhz       REAL,
    busy           REAL,
    residency      TEXT    CHECK (residency IS NULL OR json_valid(residency)),
    ops_per_s      REAL,
    joules_per_op  REAL,
    warnings       TEXT,
    PRIMARY KEY (run_id, kind, loops)
) STRICT;

-- A mode of a manual configuration, read by hand from a meter's display (W).
CREATE TABLE manual_mode (
    configuration_id  INTEGER NOT NULL REFERENCES configuration (id) ON DELETE CASCADE,
    mode              TEXT    NOT NULL,
    watts             REAL    NOT NULL,
    position          INTEGER NOT NULL,
    PRIMARY KEY (configuration_id, mode)
) STRICT;

-- Electricity prices. `effective_from` is an ISO date (YYYY-MM-DD); `periods` is JSON
-- (time-of-day prices per kWh).
CREATE TABLE tariff (
    id                       INTEGER PRIMARY KEY,
    effective_from           TEXT    NOT NULL,
    currency                 TEXT    NOT NULL,
    price_per_kwh            REAL    NOT NULL,
    standing_charge_per_day  REAL    NOT NULL DEFAULT 0,
    periods                  TEXT    CHECK (periods IS NULL OR json_valid(periods))
) STRICT;

-- A fitted correction for one source of one host (JSON).
CREATE TABLE calibration (
    host        TEXT    NOT NULL,
    source      TEXT    NOT NULL,
    fit         TEXT    NOT NULL CHECK (json_valid(fit)),
    created_ms  INTEGER NOT NULL,
    PRIMARY KEY (host, source, created_ms)
) STRICT;
