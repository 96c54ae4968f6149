-- Which protocol each wall meter spoke, recorded by `wattson run` as it starts each meter
-- (a new row only when the protocol changed). The protocol names the meter's accuracy
-- (docs/meters.md), so a report or status of this database states the interval of its own
-- history, whatever the configuration that reads it says.
CREATE TABLE meter_protocol (
    host      TEXT    NOT NULL,
    source    TEXT    NOT NULL,
    protocol  TEXT    NOT NULL,
    since_ms  INTEGER NOT NULL,
    PRIMARY KEY (host, source, since_ms)
) STRICT, WITHOUT ROWID;
