-- Idle-power regression checks (`wattson sweep --regression-check`): the idle level of a
-- new sweep against the configuration's baseline, and whether idle rose. Watts are W, `*_ci95_w`
-- half-widths of 95 % intervals in W; `checked_ms` UTC ms. One row per check, never updated:
-- the latest row per configuration is the current verdict.
CREATE TABLE idle_regression (
    id                INTEGER PRIMARY KEY,
    configuration_id  INTEGER NOT NULL REFERENCES configuration (id) ON DELETE CASCADE,
    host              TEXT,
    checked_ms        INTEGER NOT NULL,
    baseline_run_id   INTEGER REFERENCES sweep_run (id) ON DELETE SET NULL,
    latest_run_id     INTEGER REFERENCES sweep_run (id) ON DELETE SET NULL,
    baseline_w        REAL    NOT NULL,
    baseline_ci95_w   REAL    NOT NULL,
    latest_w          REAL    NOT NULL,
    latest_ci95_w     REAL    NOT NULL,
    delta_w           REAL    NOT NULL,
    delta_ci95_w      REAL    NOT NULL,
    threshold_w       REAL    NOT NULL,
    detected          INTEGER NOT NULL CHECK (detected IN (0, 1))
) STRICT;
CREATE INDEX idle_regression_configuration ON idle_regression (configuration_id, checked_ms);

-- For dashboards reading the database directly: every check, times in UTC seconds.
CREATE VIEW idle_regressions AS
SELECT c.name AS configuration, g.host, g.checked_ms / 1000 AS time,
       g.baseline_w, g.baseline_ci95_w, g.latest_w, g.latest_ci95_w,
       g.delta_w, g.delta_ci95_w, g.threshold_w, g.detected
FROM idle_regression g JOIN configuration c ON c.id = g.configuration_id;
