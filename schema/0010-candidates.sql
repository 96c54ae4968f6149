-- Candidate machines: `wattson candidate import FILE` (SPECpower_ssj2008 results, the full
-- curve or the two-point form) and `wattson candidate add NAME` (by hand), priced by
-- `wattson report` on this host's own measured load.
--
-- `name` is unique. `curve_kind` says where the curve came from: 'spec' (a published
-- result's eleven points), 'spec-two-point' (watts at active idle and at 100 % only: the
-- report interpolates linearly and says so) or 'hand'. `curve` is a JSON array of points
-- `{"load": 0.0..1.0, "watts": W, "ssj_ops": ops?}`, sorted by load, from active idle (0) to
-- 100 % (1); it is checked when written and when read. `origin` names the file and line (or
-- `hand`). `price` is what buying it costs (the tariff's currency), `perf_ratio` its
-- throughput over this machine's, given by the user. `stated_annual_cost` and
-- `stated_price_per_kwh` keep a hand table's own figures, to check its arithmetic.
-- `overall_ssj_ops_per_watt` is the published score. Times are UTC ms.
CREATE TABLE candidate (
    id                        INTEGER PRIMARY KEY,
    name                      TEXT    NOT NULL UNIQUE,
    curve_kind                TEXT    NOT NULL
                              CHECK (curve_kind IN ('spec', 'spec-two-point', 'hand')),
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
    stated_annual_cost        REAL,
    stated_price_per_kwh      REAL,
    added_ms                  INTEGER NOT NULL
) STRICT;
