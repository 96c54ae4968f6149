-- The host's sleep as the kernel tells it. One row each time the daemon saw it change: from
-- `since_ms` (UTC), the kernel of boot `boot_id` (/proc/sys/kernel/random/boot_id) had
-- slept `slept_ms` since that boot (CLOCK_BOOTTIME less CLOCK_MONOTONIC). A daemon started
-- after a stop compares the newest row with the kernel now: the same boot and more time
-- asleep is a host that slept through the stop; another boot is a host that was off.
CREATE TABLE kernel_clock (
    host     TEXT    NOT NULL,
    since_ms INTEGER NOT NULL,
    boot_id  TEXT    NOT NULL CHECK (length(boot_id) = 36),
    slept_ms INTEGER NOT NULL CHECK (slept_ms >= 0),
    PRIMARY KEY (host, since_ms)
) STRICT, WITHOUT ROWID;

-- Where a gap is time the host was away, which: 'asleep' (suspended or hibernated, the
-- kernel's clocks say for how long) or 'off' (another boot followed). The meter's counter
-- over such a gap (`counted_wh`) is the host's standby or off energy, measured at the wall.
ALTER TABLE gap ADD COLUMN away TEXT CHECK (away IS NULL OR away IN ('asleep', 'off'));
