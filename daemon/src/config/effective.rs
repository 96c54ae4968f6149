//! The effective configuration printed by `wattson config check`, as TOML that parses back
//! into the same [`Config`], with secrets redacted.

use std::fmt::Write as _;
use std::path::Path;

use super::duration::format_duration;
use super::{Config, LineField, PeriodConfig};

impl Config {
    /// The effective configuration as TOML, with secrets redacted.
    pub fn to_effective_toml(&self) -> String {
        let mut out = String::new();
        let q = |s: &str| toml::Value::String(s.to_owned()).to_string();
        let p = |p: &Path| q(&p.display().to_string());
        let _ = writeln!(
            out,
            "# effective configuration{}",
            self.source.as_ref().map_or_else(
                || " (built-in defaults: no config file found)".to_owned(),
                |s| format!(" from {}", s.display())
            )
        );
        let _ = writeln!(out, "[host]");
        let _ = writeln!(out, "name = {}", q(&self.host.name));
        let _ = writeln!(out, "sysfs = {}", p(&self.host.sysfs));
        let _ = writeln!(out, "procfs = {}", p(&self.host.procfs));
        let _ = writeln!(out, "\n[storage]");
        let _ = writeln!(out, "path = {}", p(&self.storage.path));
        let _ = writeln!(
            out,
            "raw_retention = {}",
            q(&format_duration(self.storage.raw_retention))
        );
        let _ = writeln!(
            out,
            "detail_retention = {}",
            q(&format_duration(self.storage.detail_retention))
        );
        let _ = writeln!(
            out,
            "flush_interval = {}",
            q(&format_duration(self.storage.flush_interval))
        );
        for m in &self.meters {
            let _ = writeln!(out, "\n[[meter]]");
            let _ = writeln!(out, "id = {}", q(&m.id));
            let _ = writeln!(out, "protocol = {}", q(&m.protocol));
            let _ = writeln!(out, "port = {}", p(&m.port));
            if let Some(b) = m.baud {
                let _ = writeln!(out, "baud = {b}");
            }
            if let Some(par) = m.parity {
                let _ = writeln!(out, "parity = {}", q(par.as_str()));
            }
            if let Some(s) = m.stop_bits {
                let _ = writeln!(out, "stop_bits = {s}");
            }
            if let Some(a) = m.address {
                let _ = writeln!(out, "address = {a}");
            }
            let _ = writeln!(out, "interval = {}", q(&format_duration(m.interval)));
            if let Some(t) = m.timeout {
                let _ = writeln!(out, "timeout = {}", q(&format_duration(t)));
            }
            if let Some(line) = &m.line {
                let _ = writeln!(out, "[meter.line]");
                let _ = writeln!(out, "format = {}", q(if line.kv { "kv" } else { "csv" }));
                let _ = writeln!(out, "separator = {}", q(&line.separator));
                let fields: Vec<String> = line
                    .fields
                    .iter()
                    .map(|(k, f)| match f {
                        LineField::Column(c) => format!("{k} = {c}"),
                        LineField::Key(s) => format!("{k} = {}", q(s)),
                    })
                    .collect();
                let _ = writeln!(out, "fields = {{ {} }}", fields.join(", "));
                if !line.scale.is_empty() {
                    let scale: Vec<String> = line
                        .scale
                        .iter()
                        .map(|(k, s)| format!("{k} = {s}"))
                        .collect();
                    let _ = writeln!(out, "scale = {{ {} }}", scale.join(", "));
                }
            }
        }
        let _ = writeln!(out, "\n[cpu]");
        let _ = writeln!(out, "enabled = {}", self.cpu.enabled);
        let _ = writeln!(out, "interval = {}", q(&format_duration(self.cpu.interval)));
        let t = &self.tariff;
        let _ = writeln!(out, "\n[tariff]");
        let _ = writeln!(out, "currency = {}", q(&t.currency));
        let _ = writeln!(out, "price_per_kwh = {}", t.price_per_kwh);
        let _ = writeln!(
            out,
            "standing_charge_per_day = {}",
            t.standing_charge_per_day
        );
        if let Some(tz) = &t.timezone {
            let _ = writeln!(out, "timezone = {}", q(tz));
        }
        let write_periods = |out: &mut String, header: &str, periods: &[PeriodConfig]| {
            for per in periods {
                let _ = writeln!(out, "[[{header}]]");
                let _ = writeln!(out, "start = {}", q(&per.start.format("%H:%M").to_string()));
                let _ = writeln!(out, "end = {}", q(&per.end.format("%H:%M").to_string()));
                let _ = writeln!(out, "price_per_kwh = {}", per.price_per_kwh);
            }
        };
        write_periods(&mut out, "tariff.period", &t.periods);
        for c in &t.changes {
            let _ = writeln!(out, "[[tariff.change]]");
            let _ = writeln!(out, "effective_from = {}", q(&c.effective_from.to_string()));
            let _ = writeln!(out, "price_per_kwh = {}", c.price_per_kwh);
            write_periods(&mut out, "tariff.change.period", &c.periods);
        }
        if let Some(m) = &self.mqtt {
            let _ = writeln!(out, "\n[mqtt]");
            let _ = writeln!(out, "url = {}", q(&redact_url(&m.url)));
            let _ = writeln!(out, "client_id = {}", q(&m.client_id));
            if let Some(u) = &m.username {
                let _ = writeln!(out, "username = {}", q(u));
            }
            if let Some(pf) = &m.password_file {
                let _ = writeln!(out, "password_file = {}  # contents not shown", p(pf));
            }
            for (key, val) in [
                ("ca_file", &m.ca_file),
                ("client_cert_file", &m.client_cert_file),
                ("client_key_file", &m.client_key_file),
            ] {
                if let Some(v) = val {
                    let _ = writeln!(out, "{key} = {}", p(v));
                }
            }
            if m.insecure_skip_verify {
                let _ = writeln!(out, "insecure_skip_verify = true");
            }
            let _ = writeln!(out, "topic_prefix = {}", q(&m.topic_prefix));
            let _ = writeln!(out, "discovery_prefix = {}", q(&m.discovery_prefix));
            let _ = writeln!(out, "discovery = {}", m.discovery);
            let _ = writeln!(
                out,
                "publish_interval = {}",
                q(&format_duration(m.publish_interval))
            );
            let _ = writeln!(out, "keepalive = {}", q(&format_duration(m.keepalive)));
        }
        let pw = &self.power;
        let _ = writeln!(out, "\n[power]");
        let _ = writeln!(
            out,
            "rapl = {}\nhwmon = {}\ngpu = {}\nipmi = {}",
            pw.rapl, pw.hwmon, pw.gpu, pw.ipmi
        );
        let _ = writeln!(out, "ipmi_command = {}", p(&pw.ipmi_command));
        if !pw.ipmi_args.is_empty() {
            let args: Vec<String> = pw.ipmi_args.iter().map(|a| q(a)).collect();
            let _ = writeln!(out, "ipmi_args = [{}]", args.join(", "));
        }
        let _ = writeln!(out, "interval = {}", q(&format_duration(pw.interval)));
        let _ = writeln!(
            out,
            "ipmi_interval = {}",
            q(&format_duration(pw.ipmi_interval))
        );
        for u in &self.ups {
            let _ = writeln!(
                out,
                "\n[[ups]]\nid = {}\nhost = {}\nport = {}\nname = {}",
                q(&u.id),
                q(&u.host),
                u.port,
                q(&u.name)
            );
            if let Some(user) = &u.username {
                let _ = writeln!(out, "username = {}", q(user));
            }
            if let Some(pf) = &u.password_file {
                let _ = writeln!(out, "password_file = {}  # contents not shown", p(pf));
            }
            let _ = writeln!(out, "interval = {}", q(&format_duration(u.interval)));
        }
        for pl in &self.plugs {
            let _ = writeln!(
                out,
                "\n[[plug]]\nid = {}\nkind = {}\ntopic = {}",
                q(&pl.id),
                q(&pl.kind),
                q(&pl.topic)
            );
        }
        for c in &self.manual {
            let _ = writeln!(out, "\n[[config]]");
            let _ = writeln!(out, "name = {}", q(&c.name));
            if let Some(d) = &c.description {
                let _ = writeln!(out, "description = {}", q(d));
            }
            if let Some(u) = c.upgrade_cost {
                let _ = writeln!(out, "upgrade_cost = {u}");
            }
            let _ = writeln!(out, "[config.modes]");
            for (mode, watts) in &c.modes {
                let key = if mode
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
                {
                    mode.clone()
                } else {
                    q(mode)
                };
                let _ = writeln!(out, "{key} = {watts}");
            }
        }
        out
    }
}

/// Hide a password embedded in a URL (`mqtt://user:secret@host`).
pub fn redact_url(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://")
        && let Some((userinfo, host)) = rest.split_once('@')
        && let Some((user, _)) = userinfo.split_once(':')
    {
        return format!("{scheme}://{user}:<redacted>@{host}");
    }
    url.to_owned()
}
