//! A week's schedule of modes: which mode a machine is in at each local minute of the week
//! ("standby 00:00-07:00; idle; 2 loops sun 02:00-03:00"), so that a configuration's modes
//! can be priced hour by hour at the tariff in force ([`crate::ledger::annual::on_schedule`]).
//!
//! The text is entries separated by `;`. Each is a mode name, then optionally days (`mon`,
//! ..., `sun`, or a range such as `mon-fri`), then optionally a local time range `HH:MM-HH:MM`
//! (one that ends at or before it starts runs past midnight). One entry with neither days nor
//! times is the default: the mode at every minute no other entry names. Later entries win
//! where they overlap.

use std::fmt;

/// Minutes in a week.
const WEEK_MIN: usize = 7 * 24 * 60;

const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// A week's schedule of modes, by local minute of the week (Monday 00:00 first).
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// The text it was read from, normalised (`; ` between entries).
    text: String,
    /// The index into `modes` at each minute of the week.
    minutes: Vec<u8>,
    /// The mode names, in the order the text names them.
    modes: Vec<String>,
}

/// Why a schedule's text cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleError(pub String);

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScheduleError {}

impl std::str::FromStr for Schedule {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Schedule, ScheduleError> {
        let err = |entry: &str, why: &str| {
            ScheduleError(format!(
                "schedule entry {entry:?}: {why} (an entry is MODE [DAYS] [HH:MM-HH:MM], e.g. \
                 \"standby 00:00-07:00; idle; 2 loops sun 02:00-03:00\", one entry with neither \
                 days nor times being the mode at all other times)"
            ))
        };
        let mut modes: Vec<String> = Vec::new();
        let mut minutes: Vec<Option<u8>> = vec![None; WEEK_MIN];
        let mut default: Option<u8> = None;
        let mut entries = Vec::new();
        for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let words: Vec<&str> = entry.split_whitespace().collect();
            let times = words
                .last()
                .filter(|w| w.contains(':'))
                .map(|w| {
                    parse_times(w).ok_or_else(|| err(entry, "the time range is not HH:MM-HH:MM"))
                })
                .transpose()?;
            let rest = &words[..words.len() - usize::from(times.is_some())];
            let days = rest
                .last()
                .and_then(|w| parse_days(w))
                .filter(|_| rest.len() > 1);
            let name_words = &rest[..rest.len() - usize::from(days.is_some())];
            if name_words.is_empty() {
                return Err(err(entry, "it names no mode"));
            }
            let name = name_words.join(" ");
            let index = if let Some(i) = modes.iter().position(|m| *m == name) {
                i
            } else {
                if modes.len() == usize::from(u8::MAX) {
                    return Err(err(entry, "too many modes"));
                }
                modes.push(name);
                modes.len() - 1
            } as u8;
            if days.is_none() && times.is_none() {
                if default.is_some() {
                    return Err(err(entry, "a second entry with neither days nor times"));
                }
                default = Some(index);
            } else {
                let days = days.unwrap_or([true; 7]);
                let (from, to) = times.unwrap_or((0, 24 * 60));
                for (d, _) in days.iter().enumerate().filter(|(_, on)| **on) {
                    let start = d * 24 * 60 + from;
                    let len = if to > from {
                        to - from
                    } else {
                        24 * 60 - from + to
                    };
                    for m in start..start + len {
                        minutes[m % WEEK_MIN] = Some(index);
                    }
                }
            }
            entries.push(entry.to_owned());
        }
        if modes.is_empty() {
            return Err(ScheduleError(
                "the schedule is empty: name at least one mode, e.g. \"standby 00:00-07:00; idle\""
                    .to_owned(),
            ));
        }
        let minutes = minutes
            .into_iter()
            .map(|m| m.or(default))
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| {
                ScheduleError(format!(
                    "the schedule {text:?} leaves times of the week with no mode: add an entry \
                     with neither days nor times (the mode at all other times), e.g. \"; idle\""
                ))
            })?;
        Ok(Schedule {
            text: entries.join("; "),
            minutes,
            modes,
        })
    }
}

/// `HH:MM-HH:MM` as minutes of the day; the end may be `24:00`.
fn parse_times(word: &str) -> Option<(usize, usize)> {
    let (from, to) = word.split_once('-')?;
    let minute = |text: &str| -> Option<usize> {
        let (hours, minutes) = text.split_once(':')?;
        let (hours, minutes): (usize, usize) = (hours.parse().ok()?, minutes.parse().ok()?);
        (minutes < 60 && (hours < 24 || (hours == 24 && minutes == 0)))
            .then_some(hours * 60 + minutes)
    };
    let (from, to) = (minute(from)?, minute(to)?);
    (from < 24 * 60 && from != to).then_some((from, to))
}

/// `sun`, or a range `mon-fri`, as the days it holds.
fn parse_days(w: &str) -> Option<[bool; 7]> {
    let day = |d: &str| DAYS.iter().position(|x| x.eq_ignore_ascii_case(d));
    let (a, b) = match w.split_once('-') {
        Some((a, b)) => (day(a)?, day(b)?),
        None => (day(w)?, day(w)?),
    };
    let mut out = [false; 7];
    let mut d = a;
    loop {
        out[d] = true;
        if d == b {
            break;
        }
        d = (d + 1) % 7;
    }
    Some(out)
}

impl Schedule {
    /// The modes it names, in the order named.
    pub fn modes(&self) -> &[String] {
        &self.modes
    }

    /// Its text, normalised.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The runs of one mode through the week: `(first minute of the week, minutes, mode)`.
    pub fn runs(&self) -> Vec<(usize, usize, &str)> {
        let mut out: Vec<(usize, usize, &str)> = Vec::new();
        for (m, &i) in self.minutes.iter().enumerate() {
            let mode = self.modes[usize::from(i)].as_str();
            match out.last_mut() {
                Some(last) if last.2 == mode => last.1 += 1,
                _ => out.push((m, 1, mode)),
            }
        }
        out
    }

    /// Hours a week in each mode, in the order named.
    pub fn hours_a_week(&self) -> Vec<(&str, f64)> {
        self.modes
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let n = self
                    .minutes
                    .iter()
                    .filter(|&&m| usize::from(m) == i)
                    .count();
                (name.as_str(), n as f64 / 60.0)
            })
            .collect()
    }
}

/// As its text, as the effective configuration prints it.
impl serde::Serialize for Schedule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_night_of_standby_a_sunday_job_and_idle_otherwise() {
        let s: Schedule = "standby 00:00-07:00; idle; 2 loops sun 02:00-03:00"
            .parse()
            .unwrap();
        assert_eq!(s.modes(), ["standby", "idle", "2 loops"]);
        let hours: Vec<(&str, f64)> = s.hours_a_week();
        assert_eq!(
            hours,
            [("standby", 48.0), ("idle", 119.0), ("2 loops", 1.0)]
        );
        // Sunday 02:00 is the job's, Sunday 01:00 standby's.
        let at = |d: usize, h: usize| s.modes[usize::from(s.minutes[(d * 24 + h) * 60])].as_str();
        assert_eq!(at(6, 2), "2 loops");
        assert_eq!(at(6, 1), "standby");
        assert_eq!(at(0, 12), "idle");
        // Past midnight, and a range of days.
        let n: Schedule = "idle; standby mon-fri 23:00-06:00".parse().unwrap();
        assert_eq!(n.hours_a_week(), [("idle", 133.0), ("standby", 35.0)]);
        // Monday night's standby starts at 23:00; Sunday night is not in mon-fri.
        assert_eq!(n.runs().first(), Some(&(0, 23 * 60, "idle")));
        assert_eq!(n.runs()[1], (23 * 60, 7 * 60, "standby"));
    }

    #[test]
    fn a_schedule_that_cannot_be_read_says_why() {
        for (text, why) in [
            ("", "empty"),
            ("standby 00:00-07:00", "no mode"),
            ("idle; standby", "second entry"),
            ("standby 25:00-07:00; idle", "HH:MM-HH:MM"),
            ("00:00-07:00", "names no mode"),
        ] {
            let e = text.parse::<Schedule>().unwrap_err().to_string();
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }
}
