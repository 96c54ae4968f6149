-- Who woke the CPUs, per UTC hour (`[wakeups]`, stored by `wattson run`): each window's
-- wake-ups (its rate x its length) of the services and interrupt lines that woke most,
-- added to the hours the window covers in proportion. `kind` is `task` (a service,
-- container, session or machine by its group label, `service:sshd.service`; the groups
-- beyond the window's top `(other)`) or `interrupt` (a device's line, `nvme0q1 (IRQ 122)`,
-- or the kernel's kind, `LOC (Local timer interrupts)`; beyond the top `(other)`).
-- Task wake-ups and interrupts are never added together: a timer interrupt that wakes a
-- thread is counted once in each. `wakeup_host_hour` holds the seconds the windows covered
-- and the totals, so rates are wake-ups over covered seconds. Kept for [storage]
-- raw_retention. Times are UTC ms.
CREATE TABLE wakeup_hour (
    host     TEXT    NOT NULL,
    hour_ms  INTEGER NOT NULL,
    kind     TEXT    NOT NULL CHECK (kind IN ('task', 'interrupt')),
    name     TEXT    NOT NULL,
    wakeups  REAL    NOT NULL CHECK (wakeups >= 0),
    PRIMARY KEY (host, hour_ms, kind, name)
) STRICT, WITHOUT ROWID;

CREATE TABLE wakeup_host_hour (
    host          TEXT    NOT NULL,
    hour_ms       INTEGER NOT NULL,
    seconds       REAL    NOT NULL CHECK (seconds >= 0),
    task_wakeups  REAL    NOT NULL CHECK (task_wakeups >= 0),
    interrupts    REAL    NOT NULL CHECK (interrupts >= 0),
    PRIMARY KEY (host, hour_ms)
) STRICT, WITHOUT ROWID;
