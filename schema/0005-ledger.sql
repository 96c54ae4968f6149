-- The ledger: what each power rollup integrated, so no reader derives it from sample counts.
--
-- `series.spacing_ms` is the series' own sample spacing (its configured interval, or for
-- smart plugs and fleet hosts the spacing observed in the data or stated by the host), ms:
-- two samples further apart than the store's tolerance of it (twice the spacing, at least
-- the spacing plus 2 s) are a gap, and no energy is integrated between them.
ALTER TABLE series ADD COLUMN spacing_ms INTEGER CHECK (spacing_ms IS NULL OR spacing_ms > 0);

-- `rollup_hour.covered_ms` is the support of `energy_wh`: the ms of the hour that lie
-- between two samples that were integrated. `minutes` gains the same per minute (a seventh
-- column, ms). Rows written before this migration have NULL; the daemon recomputes them from
-- raw samples where those are still kept, and otherwise estimates them and sets
-- `approximate` = 1, which reports say.
ALTER TABLE rollup_hour ADD COLUMN covered_ms INTEGER CHECK (covered_ms IS NULL OR covered_ms BETWEEN 0 AND 3600000);
ALTER TABLE rollup_hour ADD COLUMN approximate INTEGER NOT NULL DEFAULT 0 CHECK (approximate IN (0, 1));

-- Dashboards: the hourly view with covered time (a new column at the end; existing queries
-- are unchanged).
DROP VIEW hourly;
CREATE VIEW hourly AS
SELECT s.host, s.source, s.metric, s.channel, s.unit,
       r.hour_ms / 1000 AS time,
       r.n, r.mean, r.min, r.max, r.energy_wh,
       r.covered_ms / 1000.0 AS covered_s, r.approximate
FROM rollup_hour r JOIN series s ON s.id = r.series_id;
