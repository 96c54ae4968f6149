-- Settings kept by `wattson idle --apply`: each file it changed, as it found it (`content`
-- its bytes, `original` the value they read as), the value it wrote, and the measured
-- saving that chose it (W, 95 % half-width). The same values are written at every boot by
-- the tmpfiles.d file it owns. `wattson idle --revert` puts `original` back (checked
-- against the settings catalogue, as the idle journal's rows are) and deletes the rows; a
-- setting put back because an error counter rose after applying is deleted the same way.
-- A file applied again keeps what was first found. Times are UTC ms.
CREATE TABLE idle_applied (
    path        TEXT    PRIMARY KEY,
    setting     TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    content     BLOB    NOT NULL,
    original    TEXT    NOT NULL,
    value       TEXT    NOT NULL,
    saving_w    REAL    NOT NULL,
    saving_ci95_w REAL  NOT NULL,
    applied_ms  INTEGER NOT NULL
) STRICT;
