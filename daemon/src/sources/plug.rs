//! Smart plugs as meters over MQTT: Tasmota and Shelly Gen2+.
//!
//! - Tasmota publishes `tele/<topic>/SENSOR` every TelePeriod:
//!   `{"Time":"..","ENERGY":{"Total":kWh,"Yesterday":kWh,"Today":kWh,"Power":W,
//!   "ApparentPower":VA,"ReactivePower":var,"Factor":0..1,"Voltage":V,"Current":A}}`.
//! - Shelly Gen2+ publishes `<device id>/status/switch:0` (with `status_ntf` on):
//!   `{"id":0,"apower":W,"voltage":V,"current":A,"pf":..,"freq":Hz,"aenergy":{"total":Wh,..}}`.
//!
//! The parsers are pure functions. One subscription task, on a [`Connection`] of the MQTT
//! driver (backoff, subscriptions re-made on reconnect), feeds every [`PlugCollector`]
//! through a bounded channel; `poll()` takes every reading since the last poll and reports
//! each as `meter:<id>` samples (W, V, A, power factor, Hz, the plug's own energy counter in
//! Wh, and the monotonic [`Metric::EnergyTotal`]), stamped with the plug's own time when the
//! message carries one with its UTC offset (Tasmota's `Time` with `SetOption52 1`) within
//! [`Limits::past_ms`] / [`Limits::future_ms`] of its receipt, else with the receipt time.
//! A payload larger than [`MAX_PLUG_BYTES`] is skipped by the driver before it is read; one
//! that does not parse is skipped here; both are counted and logged once per topic with
//! their size.
//!
//! Every reading passes the shared plausibility rules ([`wattson_collectors::plausibility`])
//! and the energy counter's bound ([`wattson_collectors::counter`]); a reading that
//! fails is dropped and counted by reason in [`Collector::device_counters`].

use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use wattson_collectors::SourceId;

use rumqttc::QoS;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wattson_collectors::counter::{EnergyStep, EnergyTracker};
use wattson_collectors::plausibility::{Limits, Reason, Rejections};
use wattson_collectors::{CollectError, Collector, DeviceCounters, Metric, Sample, Scope};

use crate::config::MqttConfig;
use crate::publish::mqtt::MqttError;
use crate::publish::mqtt::driver::{ClientSpec, Connection};

/// Hands a plug's readings (UTC ms of receipt, reading) to its collector.
type PlugSender = SyncSender<(i64, PlugReading)>;

/// Largest plug payload accepted, bytes (Tasmota's own MQTT packets are at most 1,200 bytes
/// by default; a Shelly switch status is about 600).
pub const MAX_PLUG_BYTES: usize = 8 * 1024;

pub use crate::config::PlugKind;

/// One plug: its meter id and its MQTT topic (Tasmota `%topic%`, Shelly device id / prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlugSpec {
    pub id: String,
    pub kind: PlugKind,
    pub topic: String,
    /// Negative power is export (`[[plug]] bidirectional`).
    pub bidirectional: bool,
}

impl PlugSpec {
    /// The topic this plug reports on.
    pub fn subscription(&self) -> String {
        match self.kind {
            PlugKind::Tasmota => format!("tele/{}/SENSOR", self.topic),
            PlugKind::Shelly => format!("{}/status/switch:0", self.topic),
        }
    }
}

/// One plug reading, in SI units (energy in Wh).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlugReading {
    pub power_w: f64,
    pub voltage_v: Option<f64>,
    pub current_a: Option<f64>,
    pub power_factor: Option<f64>,
    pub frequency_hz: Option<f64>,
    /// The plug's own cumulative counter, Wh (resets when the plug is reset).
    pub energy_wh: Option<f64>,
    /// When the plug took the reading, UTC ms, where the payload says so with an offset.
    pub device_ts_ms: Option<i64>,
}

impl PlugReading {
    /// True when every value is a finite number (what the parsers guarantee).
    pub fn is_finite(&self) -> bool {
        self.power_w.is_finite()
            && [
                self.voltage_v,
                self.current_a,
                self.power_factor,
                self.frequency_hz,
                self.energy_wh,
            ]
            .into_iter()
            .flatten()
            .all(f64::is_finite)
    }
}

/// Why a plug payload was rejected.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlugError {
    #[error("payload of {0} bytes exceeds {MAX_PLUG_BYTES}")]
    TooLarge(usize),
    #[error("not JSON: {0}")]
    Json(String),
    #[error("no {0} in the payload")]
    Missing(&'static str),
}

fn json(payload: &[u8]) -> Result<Value, PlugError> {
    if payload.len() > MAX_PLUG_BYTES {
        return Err(PlugError::TooLarge(payload.len()));
    }
    serde_json::from_slice(payload).map_err(|e| PlugError::Json(e.to_string()))
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64).filter(|x| x.is_finite())
}

/// Parse Tasmota's `tele/<topic>/SENSOR` payload.
pub fn parse_tasmota_sensor(payload: &[u8]) -> Result<PlugReading, PlugError> {
    let v = json(payload)?;
    let e = v.get("ENERGY").ok_or(PlugError::Missing("ENERGY"))?;
    Ok(PlugReading {
        power_w: num(e, "Power").ok_or(PlugError::Missing("ENERGY.Power"))?,
        voltage_v: num(e, "Voltage"),
        current_a: num(e, "Current"),
        power_factor: num(e, "Factor"),
        frequency_hz: num(e, "Frequency"),
        energy_wh: num(e, "Total").map(|kwh| kwh * 1000.0),
        // Local time without an offset (Tasmota's default) says nothing about UTC.
        device_ts_ms: v
            .get("Time")
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.timestamp_millis()),
    })
}

/// Parse Shelly Gen2+'s `<id>/status/switch:0` payload.
pub fn parse_shelly_switch(payload: &[u8]) -> Result<PlugReading, PlugError> {
    let v = json(payload)?;
    Ok(PlugReading {
        power_w: num(&v, "apower").ok_or(PlugError::Missing("apower"))?,
        voltage_v: num(&v, "voltage"),
        current_a: num(&v, "current"),
        power_factor: num(&v, "pf"),
        frequency_hz: num(&v, "freq"),
        energy_wh: v.get("aenergy").and_then(|a| num(a, "total")),
        device_ts_ms: None,
    })
}

/// A plug as a [`Collector`] named `meter:<id>`.
pub struct PlugCollector {
    name: SourceId,
    rx: Receiver<(i64, PlugReading)>,
    limits: Limits,
    energy: EnergyTracker,
    /// The newest reading's time, UTC ms: readings must come after it.
    newest_ms: Option<i64>,
    good: u64,
    rejected: Rejections,
}

impl std::fmt::Debug for PlugCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlugCollector")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The step of a plug's energy counter, Wh: Tasmota's `Total` has 3 decimals of kWh.
const PLUG_COUNTER_RESOLUTION_WH: f64 = 1.0;

impl PlugCollector {
    /// A collector fed by `rx` (UTC ms of receipt, reading).
    /// A bidirectional plug's negative readings are export, kept apart; any other's refused.
    pub fn new(id: &str, rx: Receiver<(i64, PlugReading)>, bidirectional: bool) -> PlugCollector {
        PlugCollector {
            name: SourceId::meter(id),
            rx,
            limits: Limits {
                bidirectional,
                ..Limits::for_ac(true)
            },
            energy: EnergyTracker::new(None, PLUG_COUNTER_RESOLUTION_WH),
            newest_ms: None,
            good: 0,
            rejected: Rejections::default(),
        }
    }

    /// The reading's samples, or why it was rejected.
    fn accept(&mut self, received_ms: i64, r: &PlugReading) -> Result<Vec<Sample>, Reason> {
        let ts = r
            .device_ts_ms
            .filter(|t| self.limits.check_timestamp(*t, received_ms).is_ok())
            .unwrap_or(received_ms);
        if self.newest_ms.is_some_and(|n| ts <= n) {
            return Err(Reason::Timestamp);
        }
        let reading = wattson_collectors::meter::MeterReading {
            power_w: Some(r.power_w),
            voltage_v: r.voltage_v,
            current_a: r.current_a,
            power_factor: r.power_factor,
            frequency_hz: r.frequency_hz,
            energy_wh: r.energy_wh,
        };
        if let Err(why) = self.limits.check_reading(&reading) {
            tracing::debug!("{}: reading dropped: {why}", self.name);
            return Err(why.reason);
        }
        let total = match r.energy_wh {
            Some(wh) => match self.energy.update(ts, wh, Some(r.power_w)) {
                EnergyStep::Rejected(why) => {
                    tracing::debug!("{}: reading dropped: {why}", self.name);
                    return Err(why.reason);
                }
                _ => Some(self.energy.total_wh()),
            },
            None => None,
        };
        self.newest_ms = Some(ts);
        let mut out = reading.to_samples(ts, &self.name);
        if let Some(total) = total {
            out.push(Sample::new(
                ts,
                self.name.clone(),
                Metric::EnergyTotal,
                "",
                total,
            ));
        }
        Ok(out)
    }
}

impl Collector for PlugCollector {
    fn source(&self) -> &SourceId {
        &self.name
    }

    fn scope(&self) -> Option<Scope> {
        Some(Scope::Wall)
    }

    fn device_counters(&self) -> Vec<DeviceCounters> {
        vec![DeviceCounters {
            id: self.name.meter_id().unwrap_or_default().to_owned(),
            good: self.good,
            implausible: self.rejected.total(),
            rejected: self.rejected.clone(),
            ..DeviceCounters::default()
        }]
    }

    /// Every reading since the last poll, each at its own time (none when the plug has not
    /// reported).
    fn poll(&mut self, _now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        let mut received = Vec::new();
        loop {
            match self.rx.try_recv() {
                Ok(r) => received.push(r),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    if !received.is_empty() {
                        break;
                    }
                    return Err(CollectError::Gone {
                        source_name: self.name.to_string(),
                        detail: "the MQTT subscription ended".to_owned(),
                    });
                }
            }
        }
        let mut out = Vec::new();
        for (received_ms, r) in &received {
            match self.accept(*received_ms, r) {
                Ok(samples) => {
                    self.good += 1;
                    out.extend(samples);
                }
                Err(reason) => self.rejected.record(reason),
            }
        }
        Ok(out)
    }
}

/// Subscribe to every plug's topic and return one collector per plug, in `plugs` order.
/// The task runs until `cancel`, reconnecting with backoff.
pub fn spawn_plugs(
    cfg: &MqttConfig,
    plugs: &[PlugSpec],
    cancel: CancellationToken,
) -> Result<(JoinHandle<()>, Vec<PlugCollector>), MqttError> {
    let mut routes: Vec<(String, PlugKind, PlugSender)> = Vec::new();
    let mut collectors = Vec::new();
    for p in plugs {
        let (tx, rx) = sync_channel(16);
        routes.push((p.subscription(), p.kind, tx));
        collectors.push(PlugCollector::new(&p.id, rx, p.bidirectional));
    }
    let mut conn = Connection::start(
        cfg,
        ClientSpec {
            role: "plugs",
            client_id: format!("{}-plugs", cfg.client_id),
            subscriptions: routes.iter().map(|(t, _, _)| t.clone()).collect(),
            qos: QoS::AtMostOnce,
            max_payload: MAX_PLUG_BYTES,
            max_outgoing: 1024,
            persistent_session: false,
            manual_acks: false,
            last_will: None,
            queue: 16,
            stats: std::sync::Arc::default(),
        },
    )?;
    let join = tokio::spawn(async move {
        while let Some(m) = conn.next_message(&cancel).await {
            let Some((_, kind, tx)) = routes.iter().find(|(t, _, _)| t == m.topic()) else {
                continue;
            };
            let parsed = match kind {
                PlugKind::Tasmota => parse_tasmota_sensor(m.payload()),
                PlugKind::Shelly => parse_shelly_switch(m.payload()),
            };
            match parsed {
                // A full channel means the sampler has not polled: drop, it wants the newest.
                Ok(r) => {
                    let _ = tx.try_send((wattson_collectors::now_ms(), r));
                }
                Err(e) => conn.skip(&m, &wattson_collectors::ErrorChain(&e)),
            }
        }
        conn.close(std::time::Duration::from_millis(200)).await;
    });
    Ok((join, collectors))
}

#[cfg(test)]
mod tests {
    use super::*;

    // A Tasmota 13.x Sonoff POW R2 / Nous A1T telemetry message, as published.
    const TASMOTA: &[u8] = br#"{"Time":"2024-03-02T18:04:21","ENERGY":{"TotalStartTime":"2023-11-05T10:12:44","Total":152.347,"Yesterday":1.032,"Today":0.421,"Period":3,"Power":38,"ApparentPower":52,"ReactivePower":35,"Factor":0.73,"Voltage":236,"Current":0.221}}"#;
    // A Shelly Plus Plug S (firmware 1.x) status/switch:0 message.
    const SHELLY: &[u8] = br#"{"id":0,"source":"timer","output":true,"apower":41.7,"voltage":231.9,"freq":50.0,"current":0.272,"pf":0.66,"aenergy":{"total":18234.512,"by_minute":[694.5,695.1,694.2],"minute_ts":1709403840},"ret_aenergy":{"total":0.0,"by_minute":[0.0,0.0,0.0],"minute_ts":1709403840},"temperature":{"tC":38.1,"tF":100.6}}"#;

    #[test]
    fn tasmota_energy_parses_in_si_units() {
        let r = parse_tasmota_sensor(TASMOTA).unwrap();
        assert_eq!(r.power_w, 38.0);
        assert_eq!(r.voltage_v, Some(236.0));
        assert_eq!(r.current_a, Some(0.221));
        assert_eq!(r.power_factor, Some(0.73));
        assert_eq!(r.energy_wh, Some(152_347.0));
        assert_eq!(r.frequency_hz, None);
    }

    #[test]
    fn shelly_switch_parses_in_si_units() {
        let r = parse_shelly_switch(SHELLY).unwrap();
        assert_eq!(r.power_w, 41.7);
        assert_eq!(r.frequency_hz, Some(50.0));
        assert_eq!(r.energy_wh, Some(18_234.512));
        assert_eq!(r.power_factor, Some(0.66));
    }

    #[test]
    fn bad_plug_payloads_are_errors() {
        assert_eq!(
            parse_tasmota_sensor(br#"{"Time":"x","AM2301":{"Temperature":20}}"#),
            Err(PlugError::Missing("ENERGY"))
        );
        assert_eq!(
            parse_shelly_switch(br#"{"id":0,"output":false}"#),
            Err(PlugError::Missing("apower"))
        );
        assert!(matches!(
            parse_shelly_switch(b"\xff"),
            Err(PlugError::Json(_))
        ));
        let big = vec![b' '; MAX_PLUG_BYTES + 1];
        assert!(matches!(
            parse_tasmota_sensor(&big),
            Err(PlugError::TooLarge(_))
        ));
    }

    fn reading(p: f64, wh: f64) -> PlugReading {
        PlugReading {
            power_w: p,
            energy_wh: Some(wh),
            ..PlugReading::default()
        }
    }

    const MIN: i64 = 60_000;

    proptest::proptest! {
        // 2,000 cases; more: PROPTEST_CASES=20000 cargo test -p wattson --lib plug::tests::fuzz
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2000)
        ))]

        /// Arbitrary bytes as either firmware's payload: no panic, finite readings only.
        #[test]
        fn fuzz_arbitrary_plug_payloads_never_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)
        ) {
            for r in [parse_tasmota_sensor(&bytes), parse_shelly_switch(&bytes)].iter().flatten() {
                proptest::prop_assert!(r.is_finite(), "{r:?}");
            }
        }

        /// A real payload with a range replaced by JSON-ish text, huge exponents and the
        /// like: no panic, finite readings only.
        #[test]
        fn fuzz_mutated_plug_payloads_never_panic(
            shelly in proptest::prelude::any::<bool>(),
            at in 0usize..300,
            len in 0usize..20,
            insert in "[-0-9eE.,\\[\\]\"{}:a-zA-Z ]{0,24}|1e400|-1e400|NaN|null|9223372036854775808",
        ) {
            let base = if shelly { SHELLY } else { TASMOTA };
            let mut text = String::from_utf8_lossy(base).into_owned();
            let at = at.min(text.len());
            let end = (at + len).min(text.len());
            text.replace_range(at..end, &insert);
            for r in [parse_tasmota_sensor(text.as_bytes()), parse_shelly_switch(text.as_bytes())].iter().flatten() {
                proptest::prop_assert!(r.is_finite(), "{r:?}");
            }
        }
    }

    #[test]
    fn collector_reports_every_reading_and_a_monotonic_total() {
        let (tx, rx) = sync_channel(4);
        let mut c = PlugCollector::new("desk", rx, false);
        assert_eq!(c.source(), &SourceId::meter("desk"));
        assert!(c.poll(0).unwrap().is_empty());
        tx.send((MIN, reading(10.0, 100.0))).unwrap();
        tx.send((2 * MIN, reading(20.0, 100.3))).unwrap();
        let s = c.poll(3 * MIN).unwrap();
        let power: Vec<(i64, f64)> = s
            .iter()
            .filter(|s| s.metric == Metric::Power)
            .map(|s| (s.ts_ms, s.value))
            .collect();
        assert_eq!(power, [(MIN, 10.0), (2 * MIN, 20.0)]);
        tx.send((3 * MIN, reading(20.0, 100.6))).unwrap();
        let s = c.poll(4 * MIN).unwrap();
        let total = s.iter().find(|s| s.metric == Metric::EnergyTotal).unwrap();
        assert!((total.value - 0.6).abs() < 1e-9, "{}", total.value);
        drop(tx);
        assert!(matches!(c.poll(6), Err(CollectError::Gone { .. })));
    }

    /// Regression: `{"ENERGY":{"Power":99999999,"Total":100}}` was stored (27.9 kWh in 20 s).
    #[test]
    fn implausible_plug_readings_are_dropped_and_counted() {
        let (tx, rx) = sync_channel(8);
        let mut c = PlugCollector::new("desk", rx, false);
        let hostile =
            parse_tasmota_sensor(br#"{"ENERGY":{"Power":99999999,"Total":100}}"#).unwrap();
        tx.send((MIN, reading(50.0, 1.0))).unwrap();
        tx.send((2 * MIN, hostile)).unwrap();
        // A counter that jumps 99 kWh in a minute at 50 W.
        tx.send((3 * MIN, reading(50.0, 100_000.0))).unwrap();
        let s = c.poll(4 * MIN).unwrap();
        assert!(s.iter().all(|s| s.ts_ms == MIN), "{s:?}");
        let counters = &c.device_counters()[0];
        assert_eq!(counters.rejected.get(Reason::Power), 1);
        assert_eq!(counters.rejected.get(Reason::EnergyCounter), 1);
        assert_eq!(counters.good, 1);
    }

    #[test]
    fn a_plug_time_with_an_offset_stamps_its_reading_when_plausible() {
        let r = parse_tasmota_sensor(
            br#"{"Time":"2026-01-01T00:00:00+00:00","ENERGY":{"Power":50,"Total":1.0}}"#,
        )
        .unwrap();
        assert_eq!(r.device_ts_ms, Some(1_767_225_600_000));
        let (tx, rx) = sync_channel(8);
        let mut c = PlugCollector::new("desk", rx, false);
        tx.send((1_767_225_600_000 + 30 * MIN, r.clone())).unwrap();
        let s = c.poll(0).unwrap();
        assert_eq!(s[0].ts_ms, 1_767_225_600_000);
        // A plug whose clock is days off is stamped when it was received.
        let mut late = r;
        late.device_ts_ms = Some(1_000);
        tx.send((1_767_225_600_000 + 31 * MIN, late)).unwrap();
        assert_eq!(c.poll(0).unwrap()[0].ts_ms, 1_767_225_600_000 + 31 * MIN);
        assert!(
            parse_tasmota_sensor(br#"{"Time":"2024-03-02T18:04:21","ENERGY":{"Power":1}}"#)
                .unwrap()
                .device_ts_ms
                .is_none()
        );
    }

    #[test]
    fn subscriptions_follow_each_firmware() {
        let t = PlugSpec {
            id: "a".into(),
            kind: PlugKind::Tasmota,
            topic: "tasmota_1A2B3C".into(),
            bidirectional: false,
        };
        assert_eq!(t.subscription(), "tele/tasmota_1A2B3C/SENSOR");
        let s = PlugSpec {
            id: "b".into(),
            kind: PlugKind::Shelly,
            topic: "shellyplusplugs-aabbcc".into(),
            bidirectional: false,
        };
        assert_eq!(s.subscription(), "shellyplusplugs-aabbcc/status/switch:0");
    }
}
