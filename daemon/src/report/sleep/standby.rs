//! Where this machine's standby watts come from: the one place that decides it. Given with
//! `--standby-watts`, that; else measured at the wall over its sleeps
//! ([`crate::ledger::standby`]); else what the file gives.

use crate::config::Config;

/// This machine's standby power: (W, its 95 % half-width where measured, where it came from
/// in words), or `None` where nothing gives one. In order: `flag` (`--standby-watts`),
/// `[sleep] standby_watts`, then the `standby` mode of this host's `[[config]]` (the one
/// `[sleep] config` names, else the one named as the host, else the only one with a
/// standby mode).
pub fn standby_watts(config: &Config, flag: Option<f64>) -> Option<(f64, Option<f64>, String)> {
    if let Some(w) = flag {
        return Some((w, None, "given with --standby-watts".to_owned()));
    }
    if let Some(w) = config.sleep.standby_watts {
        return Some((w, None, "given in [sleep] standby_watts".to_owned()));
    }
    let standby = |c: &crate::config::ManualConfig| {
        c.modes
            .iter()
            .find(|(m, _)| m == crate::analysis::modes::STANDBY)
            .map(|(_, w)| *w)
    };
    let named = config
        .sleep
        .config
        .as_deref()
        .or(Some(config.host.name.as_str()))
        .and_then(|name| config.manual.iter().find(|c| c.name == name));
    let only = || {
        let mut with: Vec<_> = config
            .manual
            .iter()
            .filter(|c| standby(c).is_some())
            .collect();
        (with.len() == 1).then(|| with.remove(0))
    };
    let c = named.filter(|c| standby(c).is_some()).or_else(only)?;
    Some((
        standby(c)?,
        None,
        format!(
            "entered by hand: the standby mode of [[config]] \"{}\"",
            c.name
        ),
    ))
}

/// The standby figure of `settings`, unless the host's standby measured at the wall
/// (`measured`, its figures of the time away) stands before it: always but for one given
/// with `--standby-watts`.
pub fn with_measured(
    settings: &super::gather::Settings,
    measured: &[crate::ledger::standby::AwayFigure],
) -> Option<(f64, Option<f64>, String)> {
    let asleep = measured
        .iter()
        .find(|f| f.away == crate::store::Away::Asleep)
        .filter(|_| !settings.standby_by_flag);
    match asleep {
        Some(f) => Some((f.watts, f.ci95_watts, f.basis.clone())),
        None => settings.standby.clone(),
    }
}

/// What to do where there is no standby figure.
pub const HOW_TO_GET_ONE: &str = "no standby figure: let the host sleep once with the meter \
     in (wattson measures standby at the wall from the meter's counter), or give its power asleep at the \
     wall with `--standby-watts W`, `[sleep] standby_watts = W`, or a `standby` mode in its \
     `[[config]]` (`modes = { standby = W, ... }`; `[sleep] config = \"NAME\"` names which)";
