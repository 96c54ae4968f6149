//! What `wattson run` needs from this machine beyond a valid file, checked before anything
//! is opened: by `config check` (the unit's `ExecStartPre=`), `run`, `collect` and a reload,
//! so that all of them refuse the same configs.

use std::path::{Path, PathBuf};

use crate::config::{Config, ConfigError};
use crate::publish::mqtt::MqttError;

/// What `wattson run` needs from this machine beyond a valid file, checked as the user that
/// runs it, by `config check` (the unit's `ExecStartPre=`) and by `run` before it opens
/// anything, so that both refuse the same configs: the MQTT connection settings as the
/// client will use them (the URL, the password file or systemd credential, which must be
/// readable, the TLS files). `Ok` holds warnings about what may still work later: a meter's
/// port that is not a character device, a password file every user can read, a UPS password
/// file that cannot be read. A port that does not exist yet is [`missing_ports`]' warning:
/// `run` leaves it to the meter's collector, which says so when it first tries to open it.
#[allow(
    clippy::disallowed_methods,
    reason = "a UPS password file, read to check it: never a database"
)]
pub fn preflight(config: &Config) -> Result<Vec<String>, ConfigError> {
    let mut warnings = Vec::new();
    if let Some(mqtt) = &config.mqtt {
        crate::publish::mqtt::broker_access(mqtt).map_err(|e| mqtt_unusable(config, &e))?;
        if let Ok(Some(file)) = mqtt.password_path() {
            warnings.extend(world_readable(&file, "mqtt"));
        }
    }
    for m in &config.meters {
        use std::os::unix::fs::FileTypeExt as _;
        if let Ok(meta) = std::fs::metadata(&m.port)
            && !meta.file_type().is_char_device()
        {
            warnings.push(format!(
                "meter {}: port {} is not a character device: is it the serial adapter?",
                m.id,
                m.port.display()
            ));
        }
    }
    for u in &config.ups {
        if let Some(file) = &u.password_file {
            match std::fs::File::open(file) {
                Ok(_) => warnings.extend(world_readable(file, "ups")),
                Err(e) => warnings.push(format!(
                    "ups {}: password_file {} cannot be read by {} ({e}): upsd will be asked \
                     without a login",
                    u.id,
                    file.display(),
                    this_user()
                )),
            }
        }
    }
    Ok(warnings)
}

/// A warning for each meter port that is not there (yet): `config check` says so; `run`
/// starts anyway and opens the port when it appears.
pub fn missing_ports(config: &Config) -> Vec<String> {
    config
        .meters
        .iter()
        .filter_map(|m| {
            let e = std::fs::metadata(&m.port).err()?;
            Some(format!(
                "meter {}: port {} is not there ({e}): plug the adapter in, or fix meter.port \
                 (ls /dev/serial/by-id/ lists adapters; `wattson meter probe PORT` finds the \
                 meter); wattson run starts anyway and opens it when it appears",
                m.id,
                m.port.display()
            ))
        })
        .collect()
}

/// `uid N`, for messages about what this process may read.
fn this_user() -> String {
    format!("this user (uid {})", nix::unistd::geteuid())
}

/// An MQTT setting `run` could not use, as a config error naming the key.
fn mqtt_unusable(config: &Config, e: &MqttError) -> ConfigError {
    let (key, message) = match e {
        MqttError::ReadFile { what, path, source } => {
            let hint = if source.kind() == std::io::ErrorKind::PermissionDenied {
                format!(
                    ": {} cannot read it; as a service, put the password in the root-only file \
                     the unit's LoadCredential= names and set password_credential = \
                     \"mqtt-password\" (see docs/operations.md, \"Running as a service\")",
                    this_user()
                )
            } else {
                String::new()
            };
            (
                (*what).to_owned(),
                format!("{}: {source}{hint}", path.display()),
            )
        }
        MqttError::Pem { what, .. } => ((*what).to_owned(), e.to_string()),
        MqttError::PasswordWithoutUser { .. } => ("mqtt.username".to_owned(), e.to_string()),
        MqttError::Credential(why) => ("mqtt.password_credential".to_owned(), why.to_string()),
        MqttError::Tls { .. } | MqttError::Relay { .. } => ("mqtt".to_owned(), e.to_string()),
    };
    unusable(config, key, message)
}

/// `key` of `config` is valid as written but unusable here (exit 78), naming the file it came
/// from and the line the key is on.
pub fn unusable(config: &Config, key: String, message: String) -> ConfigError {
    ConfigError::Unusable {
        path: config
            .source
            .clone()
            .unwrap_or_else(|| PathBuf::from("(built-in defaults)")),
        line: config.mqtt.as_ref().and_then(|m| m.lines.line(&key)),
        key,
        message,
    }
}

/// A warning when a file holding a secret can be read by every user on the machine.
fn world_readable(path: &Path, section: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode();
    (mode & 0o004 != 0).then(|| {
        format!(
            "{} holds the {section} password and is readable by every user: chmod o-r {}",
            path.display(),
            path.display()
        )
    })
}
