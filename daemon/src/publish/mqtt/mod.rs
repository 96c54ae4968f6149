//! MQTT: the connection layer every client shares (broker URL, TLS, backoff), the live
//! publisher and Home Assistant discovery. The smart plugs and the fleet collector, which
//! read over MQTT, are in [`crate::sources`].
//!
//! Speaks MQTT 3.1.1 through rumqttc over `mqtt://` (TCP) or `mqtts://` (TLS, rustls). The
//! topic contract (DESIGN.md) is `<topic_prefix>/<host>/availability` (`online`/`offline`,
//! retained, the Last Will) and `<topic_prefix>/<host>/state` (one JSON object per publish
//! interval, not retained; see [`state`] for the fields and units), plus Home Assistant
//! discovery configs under `<discovery_prefix>/sensor/...` and `.../binary_sensor/...` (see
//! [`discovery`]).
//!
//! Every client (the publisher here, the plugs and the fleet collector in [`crate::sources`])
//! connects through the one [`driver`]: reconnect backoff, packet limits, subscriptions,
//! cancellation. This module turns `[mqtt]` into what the driver needs to reach the broker
//! ([`broker_access`]). Passwords are read from `password_file` and never logged.

pub mod discovery;
pub mod driver;
pub mod publisher;
pub mod state;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::MqttConfig;

pub use crate::config::broker::{Broker, BrokerUrlError, parse_url};
pub use driver::{Backoff, Connection, describe_error, is_auth_error};
pub use publisher::Publisher;
pub use state::StateExtras;

/// Why an MQTT connection could not be set up. Never carries a password.
#[derive(Debug, thiserror::Error)]
pub enum MqttError {
    #[error("reading {what} {path}")]
    ReadFile {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} {path}: {reason}")]
    Pem {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("TLS setup for {url}: {reason}")]
    Tls { url: String, reason: String },
    #[error("mqtt.password_file {path} is set but mqtt.username is not")]
    PasswordWithoutUser { path: PathBuf },
    #[error("mqtt.password_credential: {0}")]
    Credential(crate::config::CredentialNotPassed),
    #[error("opening the MQTT client's socket")]
    Relay {
        #[source]
        source: std::io::Error,
    },
}

/// What every client of `[mqtt]` needs to reach the broker. No `Debug`: it holds the
/// password.
pub struct BrokerAccess {
    pub broker: Broker,
    /// TLS settings for `mqtts://`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// User and password (read from `password_file`; empty without one).
    pub credentials: Option<(String, String)>,
    /// rumqttc refuses keepalives under one second (other than zero).
    pub keepalive: Duration,
}

/// Read `[mqtt]` into a [`BrokerAccess`]: the URL, the password file, TLS files.
pub fn broker_access(cfg: &MqttConfig) -> Result<BrokerAccess, MqttError> {
    let broker = cfg.broker.clone();
    let keepalive = if cfg.keepalive.is_zero() {
        Duration::ZERO
    } else {
        cfg.keepalive.max(Duration::from_secs(1))
    };
    let password_file = cfg.password_path().map_err(MqttError::Credential)?;
    let credentials = match (&cfg.username, &password_file) {
        (Some(user), Some(path)) => {
            let what = if cfg.password_credential.is_some() {
                "mqtt.password_credential"
            } else {
                "mqtt.password_file"
            };
            Some((user.clone(), read_password(path, what)?))
        }
        (Some(user), None) => Some((user.clone(), String::new())),
        (None, Some(path)) => {
            return Err(MqttError::PasswordWithoutUser { path: path.clone() });
        }
        (None, None) => None,
    };
    let tls = if broker.tls {
        Some(Arc::new(tls_config(cfg)?))
    } else {
        None
    };
    Ok(BrokerAccess {
        broker,
        tls,
        credentials,
        keepalive,
    })
}

/// The password: the file's content without its trailing newline.
fn read_password(path: &Path, what: &'static str) -> Result<String, MqttError> {
    let text = std::fs::read_to_string(path).map_err(|source| MqttError::ReadFile {
        what,
        path: path.to_owned(),
        source,
    })?;
    Ok(text.trim_end_matches(['\r', '\n']).to_owned())
}

fn tls_config(cfg: &MqttConfig) -> Result<rustls::ClientConfig, MqttError> {
    use rustls::pki_types::PrivateKeyDer;
    use rustls::pki_types::pem::PemObject;

    let tls_err = |reason: String| MqttError::Tls {
        url: cfg.broker.to_string(),
        reason,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err(e.to_string()))?;
    let builder = if cfg.insecure_skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        if let Some(path) = &cfg.ca_file {
            for cert in read_certs(path, "mqtt.ca_file")? {
                roots.add(cert).map_err(|e| MqttError::Pem {
                    what: "mqtt.ca_file",
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
            }
        } else {
            let native = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(native.certs);
        }
        if roots.is_empty() {
            return Err(tls_err(
                "no CA certificates: set mqtt.ca_file to the broker's CA".to_owned(),
            ));
        }
        builder.with_root_certificates(roots)
    };
    match (&cfg.client_cert_file, &cfg.client_key_file) {
        (Some(cert_path), Some(key_path)) => {
            let certs = read_certs(cert_path, "mqtt.client_cert_file")?;
            let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| MqttError::Pem {
                what: "mqtt.client_key_file",
                path: key_path.clone(),
                reason: e.to_string(),
            })?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| tls_err(format!("client certificate: {e}")))
        }
        (None, None) => Ok(builder.with_no_client_auth()),
        _ => Err(tls_err(
            "set both mqtt.client_cert_file and mqtt.client_key_file, or neither".to_owned(),
        )),
    }
}

fn read_certs(
    path: &Path,
    what: &'static str,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, MqttError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let pem = std::fs::read(path).map_err(|source| MqttError::ReadFile {
        what,
        path: path.to_owned(),
        source,
    })?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| MqttError::Pem {
            what,
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(MqttError::Pem {
            what,
            path: path.to_owned(),
            reason: "no PEM certificate in the file".to_owned(),
        });
    }
    Ok(certs)
}

/// `insecure_skip_verify = true`: accept any server certificate (signatures on the handshake
/// are still checked, so the session is encrypted, but the server is not authenticated).
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A topic segment made safe: `+`, `#`, `/` and control characters become `_`.
pub fn topic_segment(s: &str) -> String {
    s.chars()
        .map(|c| {
            if matches!(c, '+' | '#' | '/') || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_file_trailing_newline_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pw");
        std::fs::write(&p, "s3cret\n").unwrap();
        assert_eq!(read_password(&p, "mqtt.password_file").unwrap(), "s3cret");
        let e = read_password(&dir.path().join("missing"), "mqtt.password_file")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mqtt.password_file") && e.contains("missing"),
            "{e}"
        );
    }
}
