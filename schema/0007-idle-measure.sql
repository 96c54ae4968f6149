-- `wattson idle --measure`: each run, the original content of every file it may change
-- (stored before the first write, so that a crashed run can be undone by the next wattson
-- command), and what each setting was measured to save at the wall.
-- Watts are W; `*_ci95_w` half-widths of 95 % intervals in W; times UTC ms.

CREATE TABLE idle_run (
    id          INTEGER PRIMARY KEY,
    host        TEXT    NOT NULL,
    started_ms  INTEGER NOT NULL,
    ended_ms    INTEGER,
    status      TEXT    NOT NULL CHECK (status IN ('running', 'complete', 'interrupted', 'failed')),
    meter       TEXT    NOT NULL,
    -- The plan: candidates, phases, phase length (JSON).
    settings    TEXT    CHECK (settings IS NULL OR json_valid(settings))
) STRICT;

-- One file a run may write. `content` is the file's bytes as found; `value` what is written
-- back (the bracketed entry of a list file such as the ASPM policy). `restored_ms` is set once
-- the file reads as it did; a row without it after its run ended is a change still in place.
CREATE TABLE idle_original (
    run_id       INTEGER NOT NULL REFERENCES idle_run (id) ON DELETE CASCADE,
    path         TEXT    NOT NULL,
    content      BLOB    NOT NULL,
    value        TEXT    NOT NULL,
    restored_ms  INTEGER,
    PRIMARY KEY (run_id, path)
) STRICT;
CREATE INDEX idle_original_pending ON idle_original (restored_ms) WHERE restored_ms IS NULL;

-- One measured setting: idle with it changed (`changed_w`, the B phases) against idle as it
-- was (`baseline_w`, the A phases around them). `effect` is 1 when the interval of `delta_w`
-- excludes zero. `detail` holds every phase's mean, interval and sample count (JSON).
CREATE TABLE idle_effect (
    id            INTEGER PRIMARY KEY,
    run_id        INTEGER NOT NULL REFERENCES idle_run (id) ON DELETE CASCADE,
    host          TEXT    NOT NULL,
    candidate     TEXT    NOT NULL,
    name          TEXT    NOT NULL,
    original      TEXT    NOT NULL,
    changed       TEXT    NOT NULL,
    started_ms    INTEGER NOT NULL,
    ended_ms      INTEGER NOT NULL,
    baseline_w    REAL    NOT NULL,
    changed_w     REAL    NOT NULL,
    delta_w       REAL    NOT NULL,
    delta_ci95_w  REAL    NOT NULL,
    n             INTEGER NOT NULL,
    effect        INTEGER NOT NULL CHECK (effect IN (0, 1)),
    detail        TEXT    CHECK (detail IS NULL OR json_valid(detail))
) STRICT;
CREATE INDEX idle_effect_host ON idle_effect (host, candidate, ended_ms);

-- For dashboards reading the database directly: every measured setting, times in UTC s.
CREATE VIEW idle_effects AS
SELECT e.host, e.candidate, e.name, e.original, e.changed, e.ended_ms / 1000 AS time,
       e.baseline_w, e.changed_w, e.delta_w, e.delta_ci95_w, e.effect
FROM idle_effect e JOIN idle_run r ON r.id = e.run_id;
