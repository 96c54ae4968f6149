-- What each service costs (`wattson services`): CPU time per control group from cgroup v2,
-- and what a share of the wall's power above the idle floor needs, per UTC hour. Estimates
-- are made when read, against the host's newest sweep fit, so a new sweep re-prices the
-- history; nothing here is an energy figure of its own. Seconds are s, watts W, times UTC ms.
--
-- `kind` is `service`, `session`, `container`, `machine`; `other` (groups beyond the top
-- of an interval or an hour) and `rest` (time in no listed group: the kernel, init, groups
-- that ended between polls) have `name` ''. `self` is wattson's own process, shown apart:
-- its time is also inside its own unit's (or the rest's), so it is never added to the others.
CREATE TABLE service_group (
    id    INTEGER PRIMARY KEY,
    host  TEXT    NOT NULL,
    kind  TEXT    NOT NULL
          CHECK (kind IN ('service', 'session', 'container', 'machine', 'other', 'rest', 'self')),
    name  TEXT    NOT NULL,
    UNIQUE (host, kind, name)
) STRICT;

-- One group's hour. `cpu_s` is its CPU time; over the intervals with a wall reading,
-- `metered_share_s` sums (its share of the host's busy CPU time) x (interval length), and
-- `metered_share_ws` the same weighted by the wall's mean power in the interval, W s. The
-- group's estimated energy above an idle floor P0 is then
-- (metered_share_ws - P0 x metered_share_s) / 3600 Wh: the wall power above the floor, shared
-- by CPU time, interval by interval. Kept for `[storage] raw_retention`.
CREATE TABLE service_hour (
    group_id          INTEGER NOT NULL REFERENCES service_group (id) ON DELETE CASCADE,
    hour_ms           INTEGER NOT NULL,
    cpu_s             REAL    NOT NULL CHECK (cpu_s >= 0),
    metered_share_s   REAL    NOT NULL CHECK (metered_share_s >= 0),
    metered_share_ws  REAL    NOT NULL CHECK (metered_share_ws >= 0),
    PRIMARY KEY (group_id, hour_ms)
) STRICT, WITHOUT ROWID;
CREATE INDEX service_hour_hour ON service_hour (hour_ms);

-- The host's hour: the time the collector covered, the host's busy CPU time, and of the
-- covered time that with a wall reading and the wall's power over it (W s).
CREATE TABLE service_host_hour (
    host        TEXT    NOT NULL,
    hour_ms     INTEGER NOT NULL,
    elapsed_s   REAL    NOT NULL CHECK (elapsed_s >= 0),
    busy_cpu_s  REAL    NOT NULL CHECK (busy_cpu_s >= 0),
    metered_s   REAL    NOT NULL CHECK (metered_s >= 0),
    wall_ws     REAL    NOT NULL CHECK (wall_ws >= 0),
    PRIMARY KEY (host, hour_ms)
) STRICT, WITHOUT ROWID;

-- The newest interval of each host, replaced at every poll: what `wattson services` shows
-- as "now". `wall_w` is the wall's mean power over the interval (NULL without a reading).
CREATE TABLE service_latest (
    host        TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    ts_ms       INTEGER NOT NULL,
    elapsed_s   REAL    NOT NULL CHECK (elapsed_s > 0),
    cpu_s       REAL    NOT NULL CHECK (cpu_s >= 0),
    busy_cpu_s  REAL    NOT NULL CHECK (busy_cpu_s >= 0),
    wall_w      REAL,
    PRIMARY KEY (host, kind, name)
) STRICT;
