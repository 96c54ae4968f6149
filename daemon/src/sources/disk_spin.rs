//! The configured disks' spun-up share since the previous poll, as a collector
//! (`disk/disk_spun_up/<disk>`): the signal a calibration reads live
//! ([`super::calibrated_wall`]). The daemon's disk task ([`crate::runtime`]'s `disks`)
//! stores the same series for the history; this one is built only for the live estimate.

use wattson_collectors::idle::disks::{self, tracker::Tracker};
use wattson_collectors::{CollectError, Collector, Metric, Sample, SourceId, SysRoot};

use crate::config::DiskConfig;

/// Each `[[disk]]` followed by its own tracker.
pub struct DiskSpinCollector {
    root: SysRoot,
    disks: Vec<(String, Tracker)>,
}

impl DiskSpinCollector {
    /// The disks `[[disk]]` names, under `root`; `None` without any.
    pub fn new(root: SysRoot, disks: &[DiskConfig]) -> Option<DiskSpinCollector> {
        let disks: Vec<(String, Tracker)> = disks
            .iter()
            .map(|d| {
                let standby = i64::try_from(d.standby_after.as_millis()).unwrap_or(i64::MAX);
                (d.name.clone(), Tracker::new(standby))
            })
            .collect();
        (!disks.is_empty()).then_some(DiskSpinCollector { root, disks })
    }
}

impl Collector for DiskSpinCollector {
    fn source(&self) -> &SourceId {
        &SourceId::Disk
    }

    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        let mut out = Vec::with_capacity(self.disks.len());
        for (name, tracker) in &mut self.disks {
            let reading = disks::read_disk(&self.root, name).map_err(|e| CollectError::Failed {
                source_name: format!("disk {name}"),
                detail: e.to_string(),
            })?;
            if let Some(share) = tracker.observe(now_ms, reading.observed).up_share() {
                out.push(Sample::new(
                    now_ms,
                    SourceId::Disk,
                    Metric::DiskSpunUp,
                    name.as_str(),
                    share,
                ));
            }
        }
        Ok(out)
    }
}
