-- Models of the wall draw fitted from ordinary running (`wattson calibration fit`) or
-- imported from another host of the same hardware (`wattson calibration import`): the
-- model, its signals, the range of each it saw and its held-out error, as JSON
-- (`calibration::WallModel`), checked whole before any use. `borrowed_from` is the host it
-- was fitted on when imported. The newest of a host is the one used.
CREATE TABLE wall_model (
    id            INTEGER PRIMARY KEY,
    host          TEXT    NOT NULL,
    created_ms    INTEGER NOT NULL,
    borrowed_from TEXT,
    model         TEXT    NOT NULL
) STRICT;
CREATE INDEX wall_model_by_host ON wall_model (host, created_ms);
