-- Each disk's spin state per UTC hour (`[[disk]]`, stored by `wattson run`): the seconds its
-- state was known (`covered_s`) and spun up (`up_s`) within the hour, the spin-ups seen
-- starting in it, where the state came from (`source`: `sysfs`, the kernel's runtime PM
-- status; `inferred`, from the I/O counts and the drive's standby timer), and the
-- configured datasheet watts of a spun-up disk above standby when the hour was recorded
-- (`spun_up_watts`, NULL where none is configured). `disk_spinup` holds each spin-up with
-- who woke it: the control group whose reads and writes on the disk rose most since the
-- disk was last known down (`service:backup.service`; `(tie: a, b)`, `(none seen)`; without
-- cgroup v2 the process whose block I/O on any device rose most, `process:rsync`) and by
-- how many (`ios`: reads and writes; for a process, 4 KiB blocks). Both kept for [storage]
-- raw_retention. Times are UTC ms.
CREATE TABLE disk_hour (
    host           TEXT    NOT NULL,
    disk           TEXT    NOT NULL,
    hour_ms        INTEGER NOT NULL,
    up_s           REAL    NOT NULL CHECK (up_s >= 0),
    covered_s      REAL    NOT NULL CHECK (covered_s >= 0),
    spinups        INTEGER NOT NULL CHECK (spinups >= 0),
    source         TEXT    NOT NULL CHECK (source IN ('sysfs', 'inferred')),
    spun_up_watts  REAL    CHECK (spun_up_watts IS NULL OR spun_up_watts > 0),
    PRIMARY KEY (host, disk, hour_ms)
) STRICT, WITHOUT ROWID;

CREATE TABLE disk_spinup (
    host     TEXT    NOT NULL,
    disk     TEXT    NOT NULL,
    ts_ms    INTEGER NOT NULL,
    culprit  TEXT    NOT NULL,
    ios      INTEGER NOT NULL CHECK (ios >= 0),
    PRIMARY KEY (host, disk, ts_ms)
) STRICT, WITHOUT ROWID;
