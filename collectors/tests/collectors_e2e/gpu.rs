//! GPU collectors against the real H200 capture in `fixtures/gpu-h200/` (see its README):
//! NVML through a fake [`GpuApi`] that replays the capture, nvidia-smi through fake
//! programs that print it.
// Helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use wattson_collectors::power::nvidia_smi::{self, NvidiaSmiCollector, SmiError, SmiRow};
use wattson_collectors::power::nvml::{GpuApi, NvmlCollector, NvmlError, code};
use wattson_collectors::power::nvml_ffi::Nvml;
use wattson_collectors::{Action, CollectError, Collector, Metric, Sample, Scope};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/gpu-h200")
        .join(name)
}

fn capture() -> Vec<SmiRow> {
    let text = std::fs::read_to_string(fixture("h200-nvidia-smi-power.csv")).unwrap();
    nvidia_smi::parse_csv(&text).unwrap()
}

/// `name start|end <unix seconds>` lines of h200-phases.txt, in milliseconds.
fn phase(name: &str, edge: &str) -> i64 {
    let text = std::fs::read_to_string(fixture("h200-phases.txt")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name} {edge} ")))
        .unwrap();
    let secs: f64 = line.split_whitespace().nth(2).unwrap().parse().unwrap();
    (secs * 1000.0) as i64
}

fn not_supported(call: &'static str, index: u32) -> NvmlError {
    NvmlError::Call {
        call,
        index: Some(index),
        code: code::NOT_SUPPORTED,
        message: "Not Supported".to_owned(),
    }
}

/// One GPU answering from the capture, row `cursor`. Its energy counter is the integral
/// of the captured power, on top of what the driver counted before the capture began.
struct ReplayGpu {
    rows: Vec<SmiRow>,
    energy_mj: Vec<u64>,
    cursor: Arc<AtomicUsize>,
    energy_supported: bool,
    energy_calls: Arc<AtomicUsize>,
}

impl ReplayGpu {
    fn new(rows: Vec<SmiRow>, cursor: Arc<AtomicUsize>) -> Self {
        let mut energy_mj = vec![3_600_000_000_u64]; // 1 kWh already counted.
        for pair in rows.windows(2) {
            let dt_ms = pair[1].timestamp_ms.unwrap() - pair[0].timestamp_ms.unwrap();
            let mj = pair[0].power_w.unwrap() * dt_ms as f64; // W x ms = mJ
            energy_mj.push(energy_mj.last().unwrap() + mj.round() as u64);
        }
        ReplayGpu {
            rows,
            energy_mj,
            cursor,
            energy_supported: true,
            energy_calls: Arc::default(),
        }
    }

    fn row(&self) -> &SmiRow {
        &self.rows[self.cursor.load(Ordering::SeqCst)]
    }
}

impl GpuApi for ReplayGpu {
    fn count(&mut self) -> Result<u32, NvmlError> {
        Ok(1)
    }
    fn name(&mut self, _: u32) -> Result<String, NvmlError> {
        Ok("NVIDIA H200".to_owned())
    }
    fn power_mw(&mut self, _: u32) -> Result<u32, NvmlError> {
        Ok((self.row().power_w.unwrap() * 1000.0).round() as u32)
    }
    fn energy_mj(&mut self, index: u32) -> Result<u64, NvmlError> {
        self.energy_calls.fetch_add(1, Ordering::SeqCst);
        if !self.energy_supported {
            return Err(not_supported("nvmlDeviceGetTotalEnergyConsumption", index));
        }
        Ok(self.energy_mj[self.cursor.load(Ordering::SeqCst)])
    }
    fn pstate(&mut self, _: u32) -> Result<u32, NvmlError> {
        Ok(self.row().pstate.unwrap())
    }
    fn utilisation_pct(&mut self, _: u32) -> Result<u32, NvmlError> {
        Ok(self.row().utilisation_pct.unwrap() as u32)
    }
    fn sm_clock_mhz(&mut self, _: u32) -> Result<u32, NvmlError> {
        Ok(self.row().sm_clock_mhz.unwrap() as u32)
    }
}

/// Poll once per captured row, stamped with the row's time.
fn replay(energy_supported: bool) -> (Vec<Sample>, usize) {
    let rows = capture();
    let cursor = Arc::new(AtomicUsize::new(0));
    let mut gpu = ReplayGpu::new(rows.clone(), cursor.clone());
    gpu.energy_supported = energy_supported;
    let energy_calls = gpu.energy_calls.clone();
    let mut c = NvmlCollector::with_api(Box::new(gpu)).unwrap();
    let mut all = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        cursor.store(i, Ordering::SeqCst);
        all.extend(c.poll(row.timestamp_ms.unwrap()).unwrap());
    }
    (all, energy_calls.load(Ordering::SeqCst))
}

fn mean(samples: &[Sample], metric: Metric, from_ms: i64, to_ms: i64) -> f64 {
    let v: Vec<f64> = samples
        .iter()
        .filter(|s| s.metric == metric && s.channel == "gpu0")
        .filter(|s| (from_ms..to_ms).contains(&s.ts_ms))
        .map(|s| s.value)
        .collect();
    assert!(!v.is_empty(), "no {metric:?} samples in {from_ms}..{to_ms}");
    v.iter().sum::<f64>() / v.len() as f64
}

/// Watts from the energy counter over a window: first and last counter reading in it.
fn counter_watts(samples: &[Sample], from_ms: i64, to_ms: i64) -> f64 {
    let e: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.metric == Metric::EnergyCounter)
        .filter(|s| (from_ms..to_ms).contains(&s.ts_ms))
        .collect();
    let (first, last) = (e.first().unwrap(), e.last().unwrap());
    (last.value - first.value) * 3600.0 / ((last.ts_ms - first.ts_ms) as f64 / 1000.0)
}

#[test]
fn capture_parses_row_by_row() {
    let rows = capture();
    assert_eq!(rows.len(), 307);
    assert_eq!(rows[0].power_w, Some(76.98));
    assert_eq!(rows[0].sm_clock_mhz, Some(345.0));
    assert_eq!(rows[0].pstate, Some(0));
    assert!(
        rows.iter()
            .all(|r| r.index == 0 || r.timestamp_ms.is_some())
    );
    assert!(
        rows.windows(2)
            .all(|p| p[0].timestamp_ms < p[1].timestamp_ms)
    );
}

#[test]
fn resident_cuda_context_cost_is_computable_from_samples() {
    let (samples, _) = replay(true);
    let settle = 2_000; // GPU power ramps over about 1 s.
    let capture_start = samples[0].ts_ms;
    // The load script logs `idle0 start` just after creating its CUDA context, and the
    // ramp shows in the row 50 ms before that mark: a second earlier, no process held it.
    let bare_end = phase("idle0", "start") - 1_000;
    let bare = mean(&samples, Metric::Power, capture_start, bare_end);
    let resident = mean(
        &samples,
        Metric::Power,
        phase("idle0", "start") + settle,
        phase("idle0", "end"),
    );
    let full = mean(
        &samples,
        Metric::Power,
        phase("full", "start") + settle,
        phase("full", "end"),
    );
    assert!((bare - 76.94).abs() < 0.1, "bare idle {bare} W");
    assert!(
        (resident - 119.6).abs() < 0.2,
        "idle with context {resident} W"
    );
    let cost = resident - bare;
    assert!((cost - 42.7).abs() < 0.3, "resident cost {cost} W");
    assert!((685.0..695.0).contains(&full), "full load {full} W");

    // The energy counter tells the same story.
    let by_counter = counter_watts(
        &samples,
        phase("idle0", "start") + settle,
        phase("idle0", "end"),
    );
    assert!(
        (by_counter - resident).abs() < 0.5,
        "{by_counter} vs {resident}"
    );

    // With a context resident the SM clock stays at 1980 MHz instead of 345.
    let clock_bare = mean(&samples, Metric::GpuClock, capture_start, bare_end);
    let clock_resident = mean(
        &samples,
        Metric::GpuClock,
        phase("idle0", "start") + settle,
        phase("idle0", "end"),
    );
    assert_eq!(clock_bare, 345.0);
    assert_eq!(clock_resident, 1980.0);
    let util_full = mean(
        &samples,
        Metric::GpuUtilisation,
        phase("full", "start") + settle,
        phase("full", "end"),
    );
    assert!((0.9..=1.0).contains(&util_full), "{util_full}");
}

#[test]
fn every_sample_is_gpu0_and_labelled_component() {
    let rows = capture();
    let cursor = Arc::new(AtomicUsize::new(0));
    let mut c = NvmlCollector::with_api(Box::new(ReplayGpu::new(rows, cursor))).unwrap();
    assert_eq!(c.scope(), Scope::Component);
    assert_eq!(Collector::scope(&c), Some(Scope::Component));
    assert_eq!(c.gpus().next().unwrap().name, "NVIDIA H200");
    let s = c.poll(42).unwrap();
    let metrics: Vec<Metric> = s.iter().map(|s| s.metric).collect();
    assert_eq!(
        metrics,
        [
            Metric::Power,
            Metric::EnergyCounter,
            Metric::PState,
            Metric::GpuUtilisation,
            Metric::GpuClock
        ]
    );
    assert!(s.iter().all(|s| s.channel == "gpu0" && s.source == "gpu"));
    assert_eq!(s[0].value, 76.98);
    assert_eq!(s[1].value, 1000.0); // 3.6e9 mJ = 1 kWh
}

#[test]
fn unsupported_energy_counter_is_asked_once_and_skipped() {
    let (samples, energy_calls) = replay(false);
    assert_eq!(energy_calls, 1);
    assert!(!samples.iter().any(|s| s.metric == Metric::EnergyCounter));
    assert_eq!(
        samples.iter().filter(|s| s.metric == Metric::Power).count(),
        307
    );
}

/// A GPU whose every call fails with one NVML code.
struct Broken(i32);

impl Broken {
    fn err(&self, call: &'static str) -> NvmlError {
        NvmlError::Call {
            call,
            index: Some(0),
            code: self.0,
            message: "broken".to_owned(),
        }
    }
}

impl GpuApi for Broken {
    fn count(&mut self) -> Result<u32, NvmlError> {
        Ok(1)
    }
    fn name(&mut self, _: u32) -> Result<String, NvmlError> {
        Err(self.err("nvmlDeviceGetName"))
    }
    fn power_mw(&mut self, _: u32) -> Result<u32, NvmlError> {
        Err(self.err("nvmlDeviceGetPowerUsage"))
    }
    fn energy_mj(&mut self, _: u32) -> Result<u64, NvmlError> {
        Err(self.err("nvmlDeviceGetTotalEnergyConsumption"))
    }
    fn pstate(&mut self, _: u32) -> Result<u32, NvmlError> {
        Err(self.err("nvmlDeviceGetPerformanceState"))
    }
    fn utilisation_pct(&mut self, _: u32) -> Result<u32, NvmlError> {
        Err(self.err("nvmlDeviceGetUtilizationRates"))
    }
    fn sm_clock_mhz(&mut self, _: u32) -> Result<u32, NvmlError> {
        Err(self.err("nvmlDeviceGetClockInfo"))
    }
}

#[test]
fn lost_gpu_asks_for_reopen_and_other_faults_retry() {
    let mut lost = NvmlCollector::with_api(Box::new(Broken(code::GPU_IS_LOST))).unwrap();
    let err = lost.poll(0).unwrap_err();
    assert_eq!(err.action(), Action::Reopen);
    assert!(err.to_string().contains("gpu0"), "{err}");

    let mut flaky = NvmlCollector::with_api(Box::new(Broken(999))).unwrap();
    let err = flaky.poll(0).unwrap_err();
    assert_eq!(err.action(), Action::Retry);
    assert!(err.to_string().contains("nvmlDeviceGetPowerUsage"), "{err}");
}

struct NoGpus;

impl GpuApi for NoGpus {
    fn count(&mut self) -> Result<u32, NvmlError> {
        Ok(0)
    }
    fn name(&mut self, _: u32) -> Result<String, NvmlError> {
        unreachable!()
    }
    fn power_mw(&mut self, _: u32) -> Result<u32, NvmlError> {
        unreachable!()
    }
    fn energy_mj(&mut self, _: u32) -> Result<u64, NvmlError> {
        unreachable!()
    }
    fn pstate(&mut self, _: u32) -> Result<u32, NvmlError> {
        unreachable!()
    }
    fn utilisation_pct(&mut self, _: u32) -> Result<u32, NvmlError> {
        unreachable!()
    }
    fn sm_clock_mhz(&mut self, _: u32) -> Result<u32, NvmlError> {
        unreachable!()
    }
}

#[test]
fn no_gpus_is_unavailable() {
    let err = NvmlCollector::with_api(Box::new(NoGpus)).unwrap_err();
    assert!(matches!(err, NvmlError::NoGpus));
    assert_eq!(CollectError::from(err).action(), Action::Stop);
}

#[test]
fn missing_driver_library_is_one_clear_unavailable_error() {
    let err = Nvml::open_at("/nonexistent/libnvidia-ml.so.1").unwrap_err();
    assert!(matches!(err, NvmlError::LibraryMissing { .. }), "{err}");
    let err = CollectError::from(err);
    assert_eq!(err.action(), Action::Stop);
    let text = err.to_string();
    assert!(text.contains("/nonexistent/libnvidia-ml.so.1"), "{text}");
    assert!(text.contains("no NVIDIA driver"), "{text}");
}

#[test]
fn a_library_without_nvml_symbols_is_refused() {
    // libc is on every Linux machine and has no NVML entry points.
    let err = Nvml::open_at("libc.so.6").unwrap_err();
    assert!(
        matches!(
            err,
            NvmlError::MissingSymbol {
                symbol: "nvmlInit_v2",
                ..
            }
        ),
        "{err}"
    );
}

/// A stand-in `nvidia-smi`: a shell script in a temp dir.
fn fake_smi(dir: &Path, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("nvidia-smi");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn nvidia_smi_collector_reads_what_the_program_prints() {
    let dir = tempfile::tempdir().unwrap();
    // What the collector's own query prints on the H200 under load (first full-load row).
    let smi = fake_smi(
        dir.path(),
        "case \"$1\" in --query-gpu=index,*) ;; *) exit 2;; esac\n\
         echo 'index, power.draw [W], clocks.current.sm [MHz], utilization.gpu [%], pstate'\n\
         echo '0, 688.83, 1560, 95, P0'",
    );
    let mut c = NvidiaSmiCollector::new(&smi, Duration::from_secs(10)).unwrap();
    assert_eq!(Collector::scope(&c), Some(Scope::Component));
    let s = c.poll(5).unwrap();
    assert_eq!(s.len(), 4);
    assert_eq!((s[0].metric, s[0].value), (Metric::Power, 688.83));
    assert_eq!((s[2].metric, s[2].value), (Metric::GpuUtilisation, 0.95));
    assert!(s.iter().all(|s| s.channel == "gpu0" && s.ts_ms == 5));
}

/// The fixture GPU's UUID (`GPU UUID` in h200-nvidia-smi-q.txt).
fn h200_uuid() -> String {
    let q = std::fs::read_to_string(fixture("h200-nvidia-smi-q.txt")).unwrap();
    let line = q
        .lines()
        .find(|l| l.trim().starts_with("GPU UUID"))
        .unwrap();
    line.split(':').nth(1).unwrap().trim().to_owned()
}

#[test]
fn nvidia_smi_counts_compute_processes_per_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let uuid = h200_uuid();
    // The resident-idle row of the capture, with one process holding a context.
    let smi = fake_smi(
        dir.path(),
        &format!(
            "case \"$1\" in\n\
             --query-gpu=index,uuid,*) echo 'index, uuid, power.draw [W], clocks.current.sm [MHz], utilization.gpu [%], pstate'; echo '0, {uuid}, 119.62, 1980, 0, P0';;\n\
             --query-compute-apps=gpu_uuid,pid) echo '{uuid}, 31337';;\n\
             *) exit 2;;\n\
             esac"
        ),
    );
    let mut c = NvidiaSmiCollector::new(&smi, Duration::from_secs(10)).unwrap();
    let s = c.poll(9).unwrap();
    let procs: Vec<&Sample> = s
        .iter()
        .filter(|s| s.metric == Metric::GpuProcesses)
        .collect();
    assert_eq!(procs.len(), 1);
    assert_eq!((procs[0].channel.as_str(), procs[0].value), ("gpu0", 1.0));
    assert_eq!(s.len(), 5);
}

#[test]
fn a_failing_compute_apps_query_leaves_the_count_out() {
    let dir = tempfile::tempdir().unwrap();
    let uuid = h200_uuid();
    for apps in [
        "echo 'Failed to query compute apps' >&2; exit 3",
        "echo 'garbage line'",
    ] {
        let smi = fake_smi(
            dir.path(),
            &format!(
                "case \"$1\" in\n\
                 --query-gpu=*) echo 'index, uuid, power.draw [W], clocks.current.sm [MHz], utilization.gpu [%], pstate'; echo '0, {uuid}, 76.98, 345, 0, P0';;\n\
                 *) {apps};;\n\
                 esac"
            ),
        );
        let mut c = NvidiaSmiCollector::new(&smi, Duration::from_secs(10)).unwrap();
        let s = c.poll(9).unwrap();
        assert_eq!(s.len(), 4, "{apps}");
        assert!(!s.iter().any(|s| s.metric == Metric::GpuProcesses));
        assert_eq!((s[0].metric, s[0].value), (Metric::Power, 76.98));
    }
}

/// A GPU whose process query answers from a script: a count, or an NVML error code.
struct ProcessScript {
    answers: Vec<Result<u32, i32>>,
    calls: Arc<AtomicUsize>,
}

impl GpuApi for ProcessScript {
    fn count(&mut self) -> Result<u32, NvmlError> {
        Ok(1)
    }
    fn name(&mut self, _: u32) -> Result<String, NvmlError> {
        Ok("NVIDIA H200".to_owned())
    }
    fn power_mw(&mut self, _: u32) -> Result<u32, NvmlError> {
        Ok(119_620)
    }
    fn energy_mj(&mut self, i: u32) -> Result<u64, NvmlError> {
        Err(not_supported("nvmlDeviceGetTotalEnergyConsumption", i))
    }
    fn pstate(&mut self, _: u32) -> Result<u32, NvmlError> {
        Ok(0)
    }
    fn utilisation_pct(&mut self, _: u32) -> Result<u32, NvmlError> {
        Ok(0)
    }
    fn sm_clock_mhz(&mut self, _: u32) -> Result<u32, NvmlError> {
        Ok(1980)
    }
    fn compute_processes(&mut self, index: u32) -> Result<u32, NvmlError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        self.answers[n.min(self.answers.len() - 1)].map_err(|code| NvmlError::Call {
            call: "nvmlDeviceGetComputeRunningProcesses_v3",
            index: Some(index),
            code,
            message: "scripted".to_owned(),
        })
    }
}

#[test]
fn nvml_process_count_is_a_sample_and_its_failures_never_fail_the_poll() {
    let calls = Arc::new(AtomicUsize::new(0));
    let gpu = ProcessScript {
        // One resident process; then a transient failure; then two; then Not Supported.
        answers: vec![Ok(1), Err(999), Ok(2), Err(code::NOT_SUPPORTED)],
        calls: calls.clone(),
    };
    let mut c = NvmlCollector::with_api(Box::new(gpu)).unwrap();
    let count = |s: &[Sample]| {
        s.iter()
            .find(|s| s.metric == Metric::GpuProcesses)
            .map(|s| (s.channel.clone(), s.value))
    };
    assert_eq!(count(&c.poll(1).unwrap()), Some(("gpu0".to_owned(), 1.0)));
    let failed = c.poll(2).unwrap();
    assert_eq!(count(&failed), None);
    assert_eq!(failed[0].metric, Metric::Power, "the rest is still polled");
    assert_eq!(count(&c.poll(3).unwrap()), Some(("gpu0".to_owned(), 2.0)));
    assert_eq!(count(&c.poll(4).unwrap()), None);
    // Not Supported is asked once, then never again.
    assert_eq!(count(&c.poll(5).unwrap()), None);
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[test]
fn nvidia_smi_without_a_driver_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let smi = fake_smi(
        dir.path(),
        "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA \
         driver. Make sure that the latest NVIDIA driver is installed and running.\"\nexit 9",
    );
    let err = NvidiaSmiCollector::new(&smi, Duration::from_secs(10)).unwrap_err();
    assert!(matches!(err, SmiError::Failed { .. }), "{err}");
    assert!(err.to_string().contains("couldn't communicate"), "{err}");

    let missing =
        NvidiaSmiCollector::new(dir.path().join("absent"), Duration::from_secs(1)).unwrap_err();
    let missing = CollectError::from(missing);
    assert_eq!(missing.action(), Action::Stop);
    assert!(missing.to_string().contains("not found"), "{missing}");
}

#[test]
fn hung_nvidia_smi_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let smi = fake_smi(dir.path(), "exec sleep 30");
    let err = NvidiaSmiCollector::new(&smi, Duration::from_millis(200)).unwrap_err();
    let err = CollectError::from(err);
    assert!(
        matches!(
            err,
            CollectError::Timeout {
                timeout_ms: 200,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.action(), Action::Retry);
}
