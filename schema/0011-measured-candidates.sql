-- A configuration wattson measured as a candidate (`wattson candidate from-sweep`): its
-- sweep's levels are the curve (`curve_kind` 'measured': watts at the wall at idle and at
-- 1 .. N busy CPUs of N), and its throughput over this machine's may come from the two
-- sweeps' loop rates. `perf_ratio_basis` says how a ratio that was not given was found
-- (NULL: given by the user, or none). SQLite cannot change a CHECK in place, so the table
-- is rebuilt; every stored candidate is kept.
CREATE TABLE candidate_v11 (
    id                        INTEGER PRIMARY KEY,
    name                      TEXT    NOT NULL UNIQUE,
    curve_kind                TEXT    NOT NULL
                              CHECK (curve_kind IN ('spec', 'spec-two-point', 'hand', 'measured')),
    curve                     TEXT    NOT NULL,
    origin                    TEXT    NOT NULL,
    vendor                    TEXT,
    system                    TEXT,
    cpu                       TEXT,
    cores                     INTEGER CHECK (cores IS NULL OR cores > 0),
    threads                   INTEGER CHECK (threads IS NULL OR threads > 0),
    memory_gb                 REAL    CHECK (memory_gb IS NULL OR memory_gb > 0),
    published                 TEXT,
    overall_ssj_ops_per_watt  REAL,
    price                     REAL    CHECK (price IS NULL OR price >= 0),
    perf_ratio                REAL    CHECK (perf_ratio IS NULL OR perf_ratio > 0),
    perf_ratio_basis          TEXT    CHECK (perf_ratio_basis IS NULL OR perf_ratio IS NOT NULL),
    stated_annual_cost        REAL,
    stated_price_per_kwh      REAL,
    added_ms                  INTEGER NOT NULL
) STRICT;
INSERT INTO candidate_v11 (id, name, curve_kind, curve, origin, vendor, system, cpu, cores,
                           threads, memory_gb, published, overall_ssj_ops_per_watt, price,
                           perf_ratio, stated_annual_cost, stated_price_per_kwh, added_ms)
SELECT id, name, curve_kind, curve, origin, vendor, system, cpu, cores, threads, memory_gb,
       published, overall_ssj_ops_per_watt, price, perf_ratio, stated_annual_cost,
       stated_price_per_kwh, added_ms
FROM candidate;
DROP TABLE candidate;
ALTER TABLE candidate_v11 RENAME TO candidate;
