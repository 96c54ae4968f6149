-- Closed raw chunks of per-core CPU series (CPU metrics on channels `cpuN`, `cpuN/<x>`),
-- which are kept for the shorter detail retention. They have their own table so that
-- pruning them empties whole pages, which SQLite frees and reuses, rather than leaving
-- holes in the pages of raw_chunk, whose other chunks are kept for the full raw retention.
-- Same columns and encoding as raw_chunk. Per-core chunks written before this table
-- existed stay in raw_chunk until they expire; readers take the union of both.
CREATE TABLE raw_detail_chunk (
    id          INTEGER PRIMARY KEY,
    series_id   INTEGER NOT NULL REFERENCES series (id),
    start_ms    INTEGER NOT NULL,
    n           INTEGER NOT NULL,
    last_ts_ms  INTEGER NOT NULL,
    last_value  REAL    NOT NULL,
    data        BLOB    NOT NULL
) STRICT;
CREATE UNIQUE INDEX raw_detail_chunk_series_start ON raw_detail_chunk (series_id, start_ms);
