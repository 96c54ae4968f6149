-- Prometheus remote write ([prometheus] remote_write): the store is the durable queue.
-- One cursor per endpoint and series: the newest sample the receiver acknowledged (or
-- refused with a 400, skipped past). The wall source's energy counter carries its running
-- integral and the last point it integrated from, so the counter continues across restarts.
CREATE TABLE remote_write_cursor (
    endpoint    TEXT    NOT NULL,
    series_id   INTEGER NOT NULL REFERENCES series(id),
    sent_ts_ms  INTEGER NOT NULL,
    joules      REAL    NOT NULL DEFAULT 0,
    last_watts  REAL,
    PRIMARY KEY (endpoint, series_id)
) STRICT, WITHOUT ROWID;

-- What each endpoint has done, kept across restarts (wattson status reads it).
CREATE TABLE remote_write_endpoint (
    endpoint         TEXT    NOT NULL PRIMARY KEY,
    samples_sent     INTEGER NOT NULL DEFAULT 0,
    samples_rejected INTEGER NOT NULL DEFAULT 0,
    failed_requests  INTEGER NOT NULL DEFAULT 0,
    last_success_ms  INTEGER,
    last_error       TEXT
) STRICT;
