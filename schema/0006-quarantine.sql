-- Stored rows the store could not decode (a corrupt raw chunk or packed minute rollups),
-- set aside here instead of failing every flush of every series: the writer moves the row
-- here in the transaction that first meets it and goes on as if the series had no such row.
-- Kept for inspection and never read back as data. `kind` names the table the row came
-- from; `start_ms` is the chunk's start (raw tables) or the hour (`rollup_hour`), UTC ms;
-- `n` the samples the row claimed to hold; `data` the blob as it was; `reason` the decode
-- error; `quarantined_ms` when it was set aside, UTC ms. No foreign key: the row outlives
-- pruning of its series' data.
CREATE TABLE quarantine (
    id              INTEGER PRIMARY KEY,
    quarantined_ms  INTEGER NOT NULL,
    kind            TEXT    NOT NULL
                    CHECK (kind IN ('raw_open', 'raw_chunk', 'raw_detail_chunk', 'rollup_hour')),
    series_id       INTEGER NOT NULL,
    start_ms        INTEGER NOT NULL,
    n               INTEGER,
    data            BLOB,
    reason          TEXT    NOT NULL
) STRICT;
CREATE INDEX quarantine_series ON quarantine (series_id, start_ms);
