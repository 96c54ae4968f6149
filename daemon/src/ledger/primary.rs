//! Which source's power is the host's: decided once, from the config, and applied by the
//! publisher, the status view and the ledger alike; and what each source's watts stand for
//! ([`scope_label`]), as `wattson status` and the live page say it.

use wattson_collectors::SourceId;

use crate::config::Config;

/// The order in which sources stand for the host's power: the wall source (the first
/// configured meter, else the first smart plug), else any other meter (the first by name),
/// else the estimate from the host's calibration, else RAPL, else hwmon. Other sources (the
/// GPU board, IPMI, a UPS) are never the host's power: they measure a part, or more than
/// this machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrimaryPower {
    wall: Option<SourceId>,
}

impl PrimaryPower {
    /// With `wall` as the preferred source.
    pub fn new(wall: Option<SourceId>) -> PrimaryPower {
        PrimaryPower { wall }
    }

    /// From the config's meters and plugs.
    pub fn from_config(config: &Config) -> PrimaryPower {
        PrimaryPower::new(
            config
                .meters
                .first()
                .map(|m| SourceId::meter(&m.id))
                .or_else(|| config.plugs.first().map(|p| SourceId::meter(&p.id))),
        )
    }

    /// The source that measures the whole machine at the wall, when one is configured.
    pub fn wall(&self) -> Option<&SourceId> {
        self.wall.as_ref()
    }

    /// Where `source` stands (lower first); `None` when it never stands for the host.
    fn rank(&self, source: &SourceId) -> Option<u8> {
        if self.wall.as_ref() == Some(source) {
            return Some(0);
        }
        match source {
            SourceId::Meter(_) => Some(1),
            SourceId::Estimate => Some(2),
            SourceId::Rapl => Some(3),
            SourceId::Hwmon => Some(4),
            _ => None,
        }
    }

    /// The host's power source among `candidates` (the sources with power now).
    pub fn pick<'a>(
        &self,
        candidates: impl IntoIterator<Item = &'a SourceId>,
    ) -> Option<&'a SourceId> {
        candidates
            .into_iter()
            .filter_map(|s| Some((self.rank(s)?, s)))
            .min()
            .map(|(_, s)| s)
    }
}

/// What a source's watts stand for, so that figures from different places are never read
/// as parts of one sum: the wall meter holds everything inside the box.
pub fn scope_label(source: &SourceId) -> Option<&'static str> {
    match source {
        SourceId::Meter(_) => Some("measured at the wall"),
        SourceId::Estimate => Some("estimated, not measured"),
        SourceId::Ups(_) => Some("a UPS: shared by every machine it feeds"),
        SourceId::Rapl | SourceId::Hwmon | SourceId::Gpu => {
            Some("measured inside the box: part of the wall figure")
        }
        SourceId::Ipmi => Some("the whole server, from its BMC"),
        SourceId::Cpu
        | SourceId::Services
        | SourceId::FleetState
        | SourceId::Disk
        | SourceId::Other(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configured_wall_then_meters_by_name_then_the_estimate_rapl_hwmon() {
        let all = [
            SourceId::Hwmon,
            SourceId::Rapl,
            SourceId::Gpu,
            SourceId::Estimate,
            SourceId::meter("b"),
            SourceId::meter("a"),
        ];
        let none = PrimaryPower::default();
        assert_eq!(none.pick(&all), Some(&SourceId::meter("a")));
        let b = PrimaryPower::new(Some(SourceId::meter("b")));
        assert_eq!(b.pick(&all), Some(&SourceId::meter("b")));
        assert_eq!(b.pick(&all[..4]), Some(&SourceId::Estimate));
        assert_eq!(b.pick(&all[..3]), Some(&SourceId::Rapl));
        assert_eq!(b.pick(&all[..1]), Some(&SourceId::Hwmon));
        assert_eq!(
            b.pick(&[SourceId::Gpu, SourceId::Ipmi, SourceId::ups("u")]),
            None
        );
    }
}
