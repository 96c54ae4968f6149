-- The gaps (`gap`) each remote-write endpoint has been sent, as
-- `wattson_gap_end_timestamp_seconds`: the newest gap row sent (or refused with a 400).
CREATE TABLE remote_write_gap_cursor (
    endpoint TEXT    NOT NULL PRIMARY KEY,
    gap_id   INTEGER NOT NULL
) STRICT;
