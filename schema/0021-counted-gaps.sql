-- The energy a meter's own counter moved by over a recorded gap in its samples (wattson not
-- running, a crash, the meter unread): counted by the meter, not sampled. Settled once by
-- the writer, when the first counter reading after the gap is stored: `counted_note` is
-- NULL until then. `counted_wh` is NULL where the counter cannot say (it went back: a reset
-- or a wrap; it moved more than any plausible load; the source has no counter), and
-- `counted_note` says why; `counted_step_wh` is the counter's resolution as its readings
-- show it (the smallest step it took around the gap).
ALTER TABLE gap ADD COLUMN counted_wh REAL CHECK (counted_wh IS NULL OR counted_wh >= 0);
ALTER TABLE gap ADD COLUMN counted_step_wh REAL;
ALTER TABLE gap ADD COLUMN counted_note TEXT;
