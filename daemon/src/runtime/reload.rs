//! SIGHUP: the config re-read and the collectors whose settings changed replaced, while
//! the rest keep running.

use std::sync::mpsc;

use wattson_collectors::SourceId;

use super::daemon::RunOptions;
use super::sampler::{Control, Scheduled};
use crate::config::Config;
use crate::runtime::notify::Notifier;
use crate::sources::wiring::{WiredSource, build_collectors, estimate_collector};

/// SIGHUP: re-read the config; replace the collectors; settings that need a restart are
/// named in a warning. A bad file leaves everything as it was.
pub(super) fn reload(
    current: &mut Config,
    opts: &RunOptions,
    notifier: &Notifier,
    control: &mpsc::Sender<Control>,
) {
    notifier.reloading();
    let path = opts.config_path.clone().or_else(|| current.source.clone());
    let new = match Config::load(path.as_deref())
        .and_then(|c| super::preflight::preflight(&c).map(|warnings| (c, warnings)))
    {
        Ok((c, warnings)) => {
            for w in warnings {
                tracing::warn!("{w}");
            }
            c
        }
        Err(e) => {
            tracing::error!(
                "reload refused, keeping the running configuration: {}",
                wattson_collectors::ErrorChain(&e)
            );
            notifier.ready();
            return;
        }
    };
    if new.storage != current.storage || new.host != current.host {
        tracing::warn!("[host] and [storage] changes take effect after a restart");
    }
    if new.plugs != current.plugs || new.mqtt != current.mqtt {
        tracing::warn!("[mqtt] and [[plug]] changes take effect after a restart");
    }
    match build_collectors(&new) {
        Ok(built) => {
            let (collectors, keep) = replacement(built, &new, current);
            let _ = control.send(Control::Replace { collectors, keep });
            let plugs = std::mem::take(&mut current.plugs);
            let mqtt = current.mqtt.take();
            *current = new;
            current.plugs = plugs;
            current.mqtt = mqtt;
        }
        Err(e) => tracing::error!(
            "reload refused, keeping the running collectors: {}",
            wattson_collectors::ErrorChain(&e)
        ),
    }
    notifier.ready();
}

/// Of the collectors `built` from the `new` config, those that replace the running ones,
/// and the running sources that keep running: unchanged sources keep running as they are
/// (smart plugs always: their changes take effect after a restart); only what changed is
/// rebuilt.
fn replacement(
    built: Vec<WiredSource>,
    new: &Config,
    current: &Config,
) -> (Vec<Scheduled>, Vec<SourceId>) {
    let same_cpu = new.cpu == current.cpu && new.host == current.host;
    let same_meters = new.meters == current.meters;
    let same_power =
        new.power == current.power && new.ups == current.ups && new.host == current.host;
    let same_services = new.services == current.services && new.host == current.host;
    let plug_sources: Vec<SourceId> = current
        .plugs
        .iter()
        .map(|p| SourceId::meter(&p.id))
        .collect();
    let keep_source = |n: &SourceId| {
        plug_sources.contains(n)
            || match n {
                SourceId::Cpu => same_cpu,
                SourceId::Services => same_services,
                SourceId::Meter(_) => same_meters,
                _ => same_power,
            }
    };
    let mut collectors: Vec<Scheduled> = built
        .into_iter()
        .filter(|c| !keep_source(c.source()))
        .map(Scheduled::from)
        .collect();
    let same_estimate = same_meters && same_power && new.plugs == current.plugs;
    if !same_estimate {
        collectors.extend(estimate_collector(new).map(Scheduled::from));
    }
    let mut keep: Vec<SourceId> = plug_sources.clone();
    if same_cpu {
        keep.push(SourceId::Cpu);
    }
    if same_services {
        keep.push(SourceId::Services);
    }
    if same_meters {
        keep.extend(crate::config::collector_names(&current.meters));
    }
    if same_estimate {
        keep.push(SourceId::Estimate);
    }
    if same_power {
        keep.extend([
            SourceId::Rapl,
            SourceId::Hwmon,
            SourceId::Gpu,
            SourceId::Ipmi,
        ]);
        keep.extend(current.ups.iter().map(|u| SourceId::ups(&u.name)));
    }
    (collectors, keep)
}
