-- How a power series' readings stand between them, the one rule its integral, covered time
-- and gaps follow (`store::integrate::Readings`): `sampled` (linear between two samples no
-- further apart than the spacing allows; every series before this version), `hold` (each
-- reading stands until the next, at most `max_hold_ms`: a plug that reports on change) or
-- `interval_mean` (each value is the mean since the one before, for at most `max_hold_ms`: a fleet
-- host's states of a held source). Stored with the series so that every reader of the
-- database applies the rule the writer did, whatever configuration reads it.
ALTER TABLE series ADD COLUMN readings TEXT NOT NULL DEFAULT 'sampled'
    CHECK (readings IN ('sampled', 'hold', 'interval_mean'));
ALTER TABLE series ADD COLUMN max_hold_ms INTEGER CHECK (max_hold_ms IS NULL OR max_hold_ms > 0);
