//! What the driver writes to the log: one line per connection error (no secrets; plain
//! words for what users cause) and skipped messages, throttled.

use std::collections::HashSet;
use std::sync::Mutex;

use rumqttc::{ConnectReturnCode, ConnectionError, StateError};

use super::CONNECT_TIMEOUT;
use crate::publish::mqtt::Broker;

/// One line describing a connection error for the log: no secrets, and plain words for the
/// errors users cause (wrong password, wrong CA, broker down).
pub fn describe_error(broker: &Broker, user: Option<&str>, e: &ConnectionError) -> String {
    match e {
        ConnectionError::ConnectionRefused(code) => {
            let why = match code {
                ConnectReturnCode::BadUserNamePassword => format!(
                    "bad username or password for user {:?} (check mqtt.username and mqtt.password_file)",
                    user.unwrap_or("")
                ),
                ConnectReturnCode::NotAuthorized => format!(
                    "not authorised (user {:?}; check mqtt.username, mqtt.password_file and the broker's ACL)",
                    user.unwrap_or("")
                ),
                ConnectReturnCode::BadClientId => {
                    "client id rejected (check mqtt.client_id)".to_owned()
                }
                ConnectReturnCode::RefusedProtocolVersion => {
                    "MQTT 3.1.1 not supported by the broker".to_owned()
                }
                ConnectReturnCode::ServiceUnavailable => "service unavailable".to_owned(),
                ConnectReturnCode::Success => "refused".to_owned(),
            };
            format!("{broker} refused the connection: {why}")
        }
        ConnectionError::Io(io) => format!("{broker}: {io}"),
        ConnectionError::Tls(t) => format!("{broker}: TLS: {t}"),
        ConnectionError::NetworkTimeout => format!(
            "{broker}: no CONNACK within {} s",
            CONNECT_TIMEOUT.as_secs()
        ),
        ConnectionError::FlushTimeout => format!(
            "{broker}: a write waited {} s for the broker to read (the broker stalled)",
            CONNECT_TIMEOUT.as_secs()
        ),
        ConnectionError::MqttState(StateError::AwaitPingResp) => {
            format!("{broker}: no answer to a keepalive ping (the broker stalled)")
        }
        ConnectionError::MqttState(
            StateError::ConnectionAborted | StateError::Deserialization(rumqttc::Error::Io(_)),
        ) => format!("{broker}: the connection was closed"),
        other => format!("{broker}: {other}"),
    }
}

/// True when the error is the broker refusing our login: retrying faster will not help.
pub fn is_auth_error(e: &ConnectionError) -> bool {
    matches!(
        e,
        ConnectionError::ConnectionRefused(
            ConnectReturnCode::BadUserNamePassword | ConnectReturnCode::NotAuthorized
        )
    )
}

/// Logs skipped messages: the first of each kind (oversized, unreadable) on each topic (up
/// to 256), then every 1000th, so a broken or hostile publisher cannot flood the log.
#[derive(Default)]
pub(super) struct SkipLog {
    inner: Mutex<(HashSet<(&'static str, String)>, u64)>,
}

impl SkipLog {
    const TOPICS: usize = 256;

    pub(super) fn log(
        &self,
        role: &str,
        kind: &'static str,
        topic: &str,
        size: u64,
        retained: bool,
        why: &dyn std::fmt::Display,
    ) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let (topics, count) = &mut *inner;
        *count += 1;
        let first_on_topic = topics.len() < Self::TOPICS && topics.insert((kind, topic.to_owned()));
        if !first_on_topic && !count.is_multiple_of(1000) {
            return;
        }
        let shown: String = topic.chars().take(200).collect();
        let retained = if retained { "retained " } else { "" };
        tracing::warn!(
            "{role}: skipped a {size}-byte {retained}message on {shown:?}: {why} ({count} skipped so far; later ones on this topic are counted, not logged)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_errors_name_the_user_not_the_password() {
        let broker = crate::publish::mqtt::parse_url("mqtt://h").unwrap();
        let e = ConnectionError::ConnectionRefused(ConnectReturnCode::BadUserNamePassword);
        let line = describe_error(&broker, Some("wattson"), &e);
        assert!(line.contains("bad username or password"), "{line}");
        assert!(line.contains("\"wattson\""), "{line}");
        assert!(is_auth_error(&e));
    }
}
