//! `[mqtt]`: the broker, its credentials and the topic prefixes, validated into
//! [`MqttConfig`], and where its password is read from when used.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use toml::Spanned;

use super::file::FileMqtt;
use super::load::line_of;
use super::validate::{KEEPALIVE, PUBLISH, Validator};
use super::{CREDENTIALS_DIRECTORY, ConfigError, KeyLines, broker, duration, redact_url};

#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MqttConfig {
    /// `url`, parsed when the file is read (never with a password: refused by validation).
    #[serde(rename = "url")]
    pub broker: broker::Broker,
    pub client_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The file holding the password, as written; see [`MqttConfig::password_path`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
    /// Or the systemd credential holding it (`LoadCredential=<name>:<file>` in the unit),
    /// read from `$CREDENTIALS_DIRECTORY/<name>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_credential: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_cert_file: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_key_file: Option<PathBuf>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_verify: bool,
    pub topic_prefix: String,
    pub discovery_prefix: String,
    pub discovery: bool,
    #[serde(serialize_with = "duration::serialize")]
    pub publish_interval: Duration,
    #[serde(serialize_with = "duration::serialize")]
    pub keepalive: Duration,
    /// Where the file keys (password, TLS files) were written: they are read when used.
    #[serde(skip)]
    pub lines: KeyLines,
}

/// A credential named in the config that systemd did not pass: `$CREDENTIALS_DIRECTORY`
/// is not set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "${CREDENTIALS_DIRECTORY} is not set, so credential {name:?} cannot be found: \
     systemd sets it for a unit with LoadCredential={name}:FILE (see wattson.service); \
     to check by hand, run with {CREDENTIALS_DIRECTORY}= the directory holding FILE, \
     e.g. sudo {CREDENTIALS_DIRECTORY}=/etc/wattson wattson config check"
)]
pub struct CredentialNotPassed {
    /// The credential's name (`password_credential`).
    pub name: String,
}

impl MqttConfig {
    /// The file the password is read from: `password_file`, or for `password_credential`
    /// the file systemd passed in `$CREDENTIALS_DIRECTORY`. `Err` says why a named credential
    /// cannot be found (wattson was not started by systemd with `LoadCredential=`).
    pub fn password_path(&self) -> Result<Option<PathBuf>, CredentialNotPassed> {
        let Some(name) = &self.password_credential else {
            return Ok(self.password_file.clone());
        };
        match std::env::var_os(CREDENTIALS_DIRECTORY).filter(|d| !d.is_empty()) {
            Some(dir) => Ok(Some(Path::new(&dir).join(name))),
            None => Err(CredentialNotPassed { name: name.clone() }),
        }
    }
}

impl Validator<'_> {
    /// `[mqtt]`; `host_name` names the default client id.
    pub(super) fn mqtt(&self, m: FileMqtt, host_name: &str) -> Result<MqttConfig, ConfigError> {
        let broker = self.mqtt_url(&m.url)?;
        let password_credential = self.mqtt_credentials(&m)?;
        let mut lines = KeyLines::default();
        let mut file = |key: &'static str, value: Option<Spanned<PathBuf>>| {
            value.map(|v| {
                lines.set(key, line_of(self.text, v.span().start));
                v.into_inner()
            })
        };
        let password_file = file("mqtt.password_file", m.password_file);
        let ca_file = file("mqtt.ca_file", m.ca_file);
        let client_cert_file = file("mqtt.client_cert_file", m.client_cert_file);
        let client_key_file = file("mqtt.client_key_file", m.client_key_file);
        if let Some(c) = &m.password_credential {
            lines.set(
                "mqtt.password_credential",
                line_of(self.text, c.span().start),
            );
        }
        Ok(MqttConfig {
            client_id: match &m.client_id {
                Some(id) => self.name(id, "mqtt.client_id")?,
                None => format!("wattson-{host_name}"),
            },
            broker,
            username: m.username,
            password_file,
            password_credential,
            ca_file,
            client_cert_file,
            client_key_file,
            insecure_skip_verify: m.insecure_skip_verify.unwrap_or(false),
            topic_prefix: self.topic_prefix(m.topic_prefix, "mqtt.topic_prefix", "wattson")?,
            discovery_prefix: self.topic_prefix(
                m.discovery_prefix,
                "mqtt.discovery_prefix",
                "homeassistant",
            )?,
            discovery: m.discovery.unwrap_or(true),
            publish_interval: self.duration(
                m.publish_interval.as_ref(),
                "mqtt.publish_interval",
                Duration::from_secs(10),
                PUBLISH,
            )?,
            keepalive: self.duration(
                m.keepalive.as_ref(),
                "mqtt.keepalive",
                Duration::from_secs(30),
                KEEPALIVE,
            )?,
            lines,
        })
    }

    /// `mqtt.url`: `mqtt://` or `mqtts://`, with no user or password in it, a host and a
    /// port from 1 to 65535 (the scheme's default without one); trimmed and parsed.
    fn mqtt_url(&self, url: &Spanned<String>) -> Result<super::broker::Broker, ConfigError> {
        let text = url.get_ref().trim().to_owned();
        if !(text.starts_with("mqtt://") || text.starts_with("mqtts://")) {
            return Err(self.err(
                url.span(),
                "mqtt.url",
                format!("{} must start with mqtt:// or mqtts://", redact_url(&text)),
            ));
        }
        if text
            .split_once("://")
            .is_some_and(|(_, r)| r.split('/').next().unwrap_or_default().contains('@'))
        {
            return Err(self.err(
                url.span(),
                "mqtt.url",
                "put the user in mqtt.username and the password in password_file or \
                 password_credential, not in the URL",
            ));
        }
        super::broker::parse_url(&text).map_err(|e| self.err(url.span(), "mqtt.url", e.reason))
    }

    /// The password's source: a file or a systemd credential (not both), and only with a
    /// username. Returns the credential's name.
    fn mqtt_credentials(&self, m: &FileMqtt) -> Result<Option<String>, ConfigError> {
        let password_credential = match &m.password_credential {
            None => None,
            Some(c) => Some(self.credential_name(c)?),
        };
        if let (Some(_), Some(c)) = (&m.password_file, &m.password_credential) {
            return Err(self.err(
                c.span(),
                "mqtt.password_credential",
                "set password_file or password_credential, not both",
            ));
        }
        let password_span = (m.password_file.as_ref().map(Spanned::span))
            .or_else(|| m.password_credential.as_ref().map(Spanned::span));
        if let (None, Some(span)) = (&m.username, password_span) {
            return Err(self.err(
                span,
                "mqtt.username",
                "a password is set but no username: add username = \"...\" to [mqtt]",
            ));
        }
        Ok(password_credential)
    }

    /// A systemd credential name (`LoadCredential=<name>:...`): a file name in
    /// `$CREDENTIALS_DIRECTORY`.
    fn credential_name(&self, v: &Spanned<String>) -> Result<String, ConfigError> {
        let name = v.get_ref().trim();
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(self.err(
                v.span(),
                "mqtt.password_credential",
                format!(
                    "{name:?} is not a credential name: use the name in the unit's \
                     LoadCredential=NAME:FILE, e.g. \"mqtt-password\""
                ),
            ));
        }
        Ok(name.to_owned())
    }

    /// A topic prefix (`mqtt.topic_prefix`, `mqtt.discovery_prefix`) without its outer
    /// slashes, or `default` when the key is absent.
    fn topic_prefix(
        &self,
        v: Option<Spanned<String>>,
        key: &str,
        default: &str,
    ) -> Result<String, ConfigError> {
        match v {
            None => Ok(default.to_owned()),
            Some(s) => {
                let p = s.get_ref().trim_matches('/').to_owned();
                if p.is_empty() || super::names::check_topic(&p, false).is_err() {
                    Err(self.err(
                        s.span(),
                        key,
                        format!(
                            "must be a non-empty, printable topic of at most {} \
                             characters without '+' or '#'",
                            super::names::MAX_TOPIC_CHARS
                        ),
                    ))
                } else {
                    Ok(p)
                }
            }
        }
    }
}
