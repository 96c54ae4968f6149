//! `mqtt.url` parsed once, when the configuration is read: the broker's host, port and
//! whether it speaks TLS, which every MQTT client (the publisher, the plugs, the fleet
//! collector, the live price) connects to as given.

use serde::{Serialize, Serializer};

/// Why `mqtt.url` is not a broker's address. Never carries a password (one in the URL is
/// refused before this is made).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mqtt.url {url}: {reason}")]
pub struct BrokerUrlError {
    pub url: String,
    pub reason: String,
}

/// Where the broker is, parsed from `mqtt.url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    pub host: String,
    /// TCP port; 1883 for `mqtt://` and 8883 for `mqtts://` unless the URL names one.
    pub port: u16,
    pub tls: bool,
}

impl std::fmt::Display for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls { "mqtts" } else { "mqtt" };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

/// Parse `mqtt://host[:port]` or `mqtts://host[:port]` (IPv6 literals in brackets; `tcp://`
/// and `ssl://` as their synonyms), by the `url` crate.
pub fn parse_url(text: &str) -> Result<Broker, BrokerUrlError> {
    let err = |reason: &str| BrokerUrlError {
        url: text.to_owned(),
        reason: reason.to_owned(),
    };
    let url = url::Url::parse(text).map_err(|e| match e {
        url::ParseError::RelativeUrlWithoutBase => err("must start with mqtt:// or mqtts://"),
        url::ParseError::InvalidPort => err("port must be a number from 1 to 65535"),
        url::ParseError::EmptyHost => err("no host"),
        e => err(&format!(
            "{e} (the host is a name or an address, an IPv6 address in brackets, [::1])"
        )),
    })?;
    let tls = match url.scheme() {
        "mqtt" | "tcp" => false,
        "mqtts" | "ssl" => true,
        _ => return Err(err("must start with mqtt:// or mqtts://")),
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(err(
            "put the user in mqtt.username and the password in mqtt.password_file",
        ));
    }
    let host = match url.host() {
        Some(url::Host::Domain(name)) if !name.is_empty() => {
            // An opaque host (these schemes are not the web's): what is not a name or an
            // IPv4 address would not read back as the same broker.
            if name.contains(['[', ']', ':', '%']) {
                return Err(err(
                    "the host is a name or an address (an IPv6 address in brackets, [::1])",
                ));
            }
            name.to_owned()
        }
        Some(url::Host::Ipv4(a)) => a.to_string(),
        Some(url::Host::Ipv6(a)) => a.to_string(),
        _ => return Err(err("no host")),
    };
    let port = match url.port() {
        None => {
            if tls {
                8883
            } else {
                1883
            }
        }
        Some(0) => return Err(err("port must be a number from 1 to 65535")),
        Some(p) => p,
    };
    Ok(Broker { host, port, tls })
}

/// As the effective config prints it: the URL the broker parses back from.
impl Serialize for Broker {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_default_ports() {
        assert_eq!(
            parse_url("mqtt://broker.lan").unwrap(),
            Broker {
                host: "broker.lan".into(),
                port: 1883,
                tls: false
            }
        );
        let b = parse_url("mqtts://[::1]:9883/").unwrap();
        assert_eq!((b.host.as_str(), b.port, b.tls), ("::1", 9883, true));
        assert_eq!(parse_url("mqtts://h").unwrap().port, 8883);
        assert!(parse_url("http://h").is_err());
        assert!(parse_url("mqtt://h:0").is_err());
        assert!(parse_url("mqtt://:1883").is_err());
        // What would not print back as the same broker (found by the config fuzz test).
        for bad in [
            "mqtt://broker.lan:]:1883",
            "mqtt://broker.lan:[:1883",
            "mqtt://a:b:1883",
            "mqtt://[broker.lan]:1883",
            "mqtt://bro ker:1883",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
        for good in [
            "mqtt://[fe80::1]:1883",
            "mqtt://10.0.0.2:1883",
            "mqtts://broker.lan",
        ] {
            let b = parse_url(good).unwrap();
            assert_eq!(parse_url(&b.to_string()).unwrap(), b, "{good}");
        }
    }

    #[test]
    fn url_with_credentials_is_refused_without_echoing_them() {
        let e = parse_url("mqtt://u:pw@h").unwrap_err().to_string();
        assert!(e.contains("password_file"), "{e}");
    }
}
