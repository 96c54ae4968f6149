//! The price published on `[tariff] price_topic` (an input, like the plugs: the price series
//! it feeds are [`crate::tariff`]'s): one subscription through the shared MQTT driver (its
//! backoff and packet-size limit), each accepted price stored as a slot from the moment it
//! arrives ([`crate::tariff::store::apply_topic_price`]) so that it prices energy from then on
//! and survives a restart. A payload that is not a price (not a number, NaN, infinite,
//! beyond `max_price_per_kwh`, larger than [`MAX_PRICE_BYTES`]) is counted, logged and
//! never applied.
//!
//! Payloads: a number (`0.2451`, as Home Assistant's MQTT statestream publishes a sensor's
//! state), or JSON with the number (or a numeric string) at `price_field`
//! (`{"state": "0.2451"}`, `{"attributes": {"current_price": 0.2451}}`). Units: the
//! configured `price_unit`, stored as currency per kWh.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rumqttc::QoS;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{MqttConfig, PriceUnit, TariffConfig};
use crate::publish::mqtt::MqttError;
use crate::publish::mqtt::driver::{ClientSpec, Connection};
use crate::store::StoreHandle;

/// The largest price message accepted, bytes (a statestream state is a few bytes, a
/// sensor's attributes a few hundred; a day of forecast prices in the attributes fits).
pub const MAX_PRICE_BYTES: usize = 16 * 1024;

/// Why a price message is not applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PriceError {
    #[error("the payload is not UTF-8 text")]
    NotText,
    #[error("{0:?} is not a number")]
    NotANumber(String),
    #[error("the JSON has no number at {0:?}")]
    NoField(String),
    #[error("{value} per kWh is not a finite price within +-{limit}")]
    OutOfRange { value: f64, limit: f64 },
}

/// What the subscription has done, for logs and tests.
#[derive(Debug, Default)]
pub struct PriceCounters {
    pub applied: AtomicU64,
    pub rejected: AtomicU64,
}

/// The price in a payload, currency per kWh.
pub fn parse_price(
    payload: &[u8],
    field: Option<&str>,
    unit: PriceUnit,
    limit: f64,
) -> Result<f64, PriceError> {
    let text = std::str::from_utf8(payload).map_err(|_| PriceError::NotText)?;
    let text = text.trim();
    let number = |s: &str| -> Result<f64, PriceError> {
        s.trim()
            .parse::<f64>()
            .map_err(|_| PriceError::NotANumber(s.chars().take(40).collect()))
    };
    let raw = match field {
        None => match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
            Ok(serde_json::Value::String(s)) => number(&s)?,
            _ => number(text)?,
        },
        Some(path) => {
            let v: serde_json::Value = serde_json::from_str(text)
                .map_err(|_| PriceError::NotANumber(text.chars().take(40).collect()))?;
            let mut at = &v;
            for key in path.split('.') {
                at = at
                    .get(key)
                    .ok_or_else(|| PriceError::NoField(path.to_owned()))?;
            }
            match at {
                serde_json::Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
                serde_json::Value::String(s) => number(s)?,
                _ => return Err(PriceError::NoField(path.to_owned())),
            }
        }
    };
    let value = raw * unit.to_per_kwh();
    if !value.is_finite() || value.abs() > limit {
        return Err(PriceError::OutOfRange { value, limit });
    }
    Ok(value)
}

/// The subscription's task and its counters.
pub type PriceTask = (JoinHandle<()>, Arc<PriceCounters>);

/// Subscribe to `tariff.price_topic` on `mqtt`'s broker and store each price as it arrives;
/// runs until `cancel`.
pub fn spawn(
    mqtt: &MqttConfig,
    tariff: &TariffConfig,
    store: StoreHandle,
    cancel: CancellationToken,
) -> Result<Option<PriceTask>, MqttError> {
    let Some(topic) = tariff.price_topic.clone() else {
        return Ok(None);
    };
    let mut conn = Connection::start(
        mqtt,
        ClientSpec {
            role: "price",
            client_id: format!("{}-price", mqtt.client_id),
            subscriptions: vec![topic.clone()],
            qos: QoS::AtLeastOnce,
            max_payload: MAX_PRICE_BYTES,
            max_outgoing: 1024,
            persistent_session: false,
            manual_acks: false,
            last_will: None,
            queue: 16,
            stats: Arc::default(),
        },
    )?;
    let counters = Arc::new(PriceCounters::default());
    let out = counters.clone();
    let (field, unit, limit) = (
        tariff.price_field.clone(),
        tariff.price_unit,
        tariff.max_price_per_kwh,
    );
    let currency = tariff.currency.clone();
    let join = tokio::spawn(async move {
        while let Some(m) = conn.next_message(&cancel).await {
            if m.topic() != topic {
                continue;
            }
            let price = match parse_price(m.payload(), field.as_deref(), unit, limit) {
                Ok(p) => p,
                Err(e) => {
                    let n = counters.rejected.fetch_add(1, Ordering::Relaxed) + 1;
                    conn.skip(&m, &e);
                    if n.is_power_of_two() {
                        tracing::warn!(
                            "price on {topic} rejected, not applied ({n} rejected so far): {e}"
                        );
                    }
                    continue;
                }
            };
            let now_ms = wattson_collectors::now_ms();
            let (cur, origin) = (currency.clone(), topic.clone());
            let stored = store
                .query_async(move |s| {
                    crate::tariff::store::apply_topic_price(s.conn(), &cur, &origin, price, now_ms)
                })
                .await;
            match stored {
                Ok(Ok(changed)) => {
                    counters.applied.fetch_add(1, Ordering::Relaxed);
                    if changed {
                        tracing::info!("price {price} {currency}/kWh from {topic}, from now on");
                    }
                }
                Ok(Err(e)) => tracing::warn!(
                    "storing the price from {topic}: {}",
                    wattson_collectors::ErrorChain(&e)
                ),
                Err(e) => tracing::warn!(
                    "storing the price from {topic}: {}",
                    wattson_collectors::ErrorChain(&e)
                ),
            }
        }
        conn.close(std::time::Duration::from_millis(200)).await;
    });
    Ok(Some((join, out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_as_home_assistant_publishes_them() {
        let p = |b: &[u8], f: Option<&str>| parse_price(b, f, PriceUnit::PerKwh, 10.0);
        assert_eq!(p(b"0.2451", None), Ok(0.2451));
        assert_eq!(p(b" -0.0213\n", None), Ok(-0.0213));
        assert_eq!(p(b"\"0.30\"", None), Ok(0.30));
        assert_eq!(p(br#"{"state":"0.19"}"#, Some("state")), Ok(0.19));
        assert_eq!(
            p(
                br#"{"attributes":{"current_price":0.21}}"#,
                Some("attributes.current_price")
            ),
            Ok(0.21)
        );
        let mwh = parse_price(b"86.5", None, PriceUnit::PerMwh, 10.0).unwrap();
        assert!((mwh - 0.0865).abs() < 1e-12);
        let cents = parse_price(b"24.5", None, PriceUnit::CentsPerKwh, 10.0).unwrap();
        assert!((cents - 0.245).abs() < 1e-12);
    }

    #[test]
    fn what_is_not_a_price_is_refused() {
        let p = |b: &[u8], f: Option<&str>| parse_price(b, f, PriceUnit::PerKwh, 10.0);
        assert!(matches!(
            p(b"unavailable", None),
            Err(PriceError::NotANumber(_))
        ));
        assert!(matches!(
            p(b"NaN", None),
            Err(PriceError::OutOfRange { .. })
        ));
        assert!(matches!(
            p(b"inf", None),
            Err(PriceError::OutOfRange { .. })
        ));
        assert!(matches!(
            p(b"1e300", None),
            Err(PriceError::OutOfRange { .. })
        ));
        assert!(matches!(
            p(b"245", None),
            Err(PriceError::OutOfRange { .. })
        ));
        assert!(matches!(p(&[0xff, 0xfe], None), Err(PriceError::NotText)));
        assert!(matches!(
            p(br#"{"x":1}"#, Some("state")),
            Err(PriceError::NoField(_))
        ));
        assert!(matches!(
            p(br#"{"state":null}"#, Some("state")),
            Err(PriceError::NoField(_))
        ));
        assert!(matches!(p(b"", None), Err(PriceError::NotANumber(_))));
    }
}
