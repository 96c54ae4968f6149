-- Price and carbon-intensity series: `wattson tariff import FILE` (Octopus unit rates,
-- ENTSO-E / Nord Pool day-ahead CSV, plain CSV; the GB carbon intensity API, plain CSV) and
-- the live price of `[tariff] price_topic` over MQTT.
--
-- `price_series` names one series (`source`: the name given at import, `mqtt` for the live
-- price). `kind` is 'price' (`unit` an ISO 4217 code; slot values are that currency per
-- kWh, negative allowed) or 'carbon' (`unit` 'gCO2/kWh'). `applied` is 1 when the series
-- prices the ledger's energy (an imported tariff the machine is on, the live price), 0 when
-- it is kept only to compare against (`--compare-only`). `format` says how it came
-- (`octopus-json`, `entsoe-csv`, `nordpool-csv`, `plain-csv`, `carbon-json`, `carbon-csv`,
-- `mqtt`) and `origin` from where (a file, a topic). `revision` grows by one on every
-- change of its slots, so a reader can tell cheaply whether to load them again.
CREATE TABLE price_series (
    id          INTEGER PRIMARY KEY,
    source      TEXT    NOT NULL UNIQUE,
    kind        TEXT    NOT NULL CHECK (kind IN ('price', 'carbon')),
    unit        TEXT    NOT NULL,
    applied     INTEGER NOT NULL DEFAULT 1 CHECK (applied IN (0, 1)),
    format      TEXT    NOT NULL,
    origin      TEXT,
    updated_ms  INTEGER NOT NULL,
    revision    INTEGER NOT NULL DEFAULT 1
) STRICT;

-- One slot of a series: `value` from `start_ms` (inclusive) to `end_ms` (exclusive), UTC
-- ms. Slots of one series never overlap (checked by whoever writes them, in the
-- transaction that writes them). `end_ms` NULL: a live price that holds until the next one
-- arrives. `currency` repeats the series' unit for price slots (NULL for carbon), so that a
-- slot read on its own says what it is in.
CREATE TABLE price_slot (
    series_id   INTEGER NOT NULL REFERENCES price_series (id) ON DELETE CASCADE,
    start_ms    INTEGER NOT NULL,
    end_ms      INTEGER CHECK (end_ms IS NULL OR end_ms > start_ms),
    value       REAL    NOT NULL,
    currency    TEXT,
    PRIMARY KEY (series_id, start_ms)
) STRICT, WITHOUT ROWID;

-- What the price was at each instant, in one readable table: start, end, price per kWh,
-- currency, source (dashboards, hand-written queries).
CREATE VIEW price_slots AS
SELECT s.source, p.start_ms, p.end_ms, p.value AS price_per_kwh, p.currency, s.applied
FROM price_slot p JOIN price_series s ON s.id = p.series_id
WHERE s.kind = 'price';
