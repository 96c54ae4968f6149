-- Views for dashboards that read the database directly (Grafana's SQLite data source).
-- Raw samples are compressed chunks only the daemon decodes; these views expose the hourly
-- rollups and the sweep tables as plain rows. Times: `time` is UTC seconds since the epoch.

CREATE VIEW hourly AS
SELECT s.host, s.source, s.metric, s.channel, s.unit,
       r.hour_ms / 1000 AS time,
       r.n, r.mean, r.min, r.max, r.energy_wh
FROM rollup_hour r JOIN series s ON s.id = r.series_id;

-- Energy per local day is left to the dashboard (it knows the viewer's time zone);
-- this is energy per UTC day, in kWh.
CREATE VIEW daily_energy AS
SELECT s.host, s.source,
       (r.hour_ms / 86400000) * 86400 AS time,
       SUM(r.energy_wh) / 1000.0 AS kwh
FROM rollup_hour r JOIN series s ON s.id = r.series_id
WHERE s.metric = 'power' AND s.channel = '' AND r.energy_wh IS NOT NULL
GROUP BY s.host, s.source, r.hour_ms / 86400000;

CREATE VIEW sweep_levels AS
SELECT c.name AS configuration, c.host, r.id AS run_id, r.status, r.started_ms / 1000 AS time,
       l.kind, l.loops, l.n, l.mean_w, l.ci95_w, l.sd_w, l.min_w, l.max_w, l.mean_mhz, l.busy,
       l.ops_per_s, l.joules_per_op
FROM sweep_level l
JOIN sweep_run r ON r.id = l.run_id
JOIN configuration c ON c.id = r.configuration_id;

CREATE VIEW gaps AS
SELECT host, source, start_ms / 1000 AS time, end_ms / 1000 AS time_end,
       (end_ms - start_ms) / 1000.0 AS seconds, reason
FROM gap;
