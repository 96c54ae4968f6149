//! NVIDIA GPU board power through NVML (nvml.h, "Device Queries"), behind the [`GpuApi`]
//! seam: [`super::nvml_ffi::Nvml`] in production, fakes in tests.
//!
//! Per GPU, channel `gpu<index>` (NVML's index order):
//! - [`Metric::Power`], W, from `nvmlDeviceGetPowerUsage` (mW; on Hopper a 1 s average,
//!   nvidia-smi's "Average Power Draw");
//! - [`Metric::EnergyCounter`], Wh, from `nvmlDeviceGetTotalEnergyConsumption` (mJ since the
//!   driver loaded; Volta and newer, skipped where the GPU says Not Supported);
//! - [`Metric::PState`] (0 = P0), [`Metric::GpuUtilisation`] (share, from percent),
//!   [`Metric::GpuClock`] (SM clock, MHz);
//! - [`Metric::GpuProcesses`] (count), from `nvmlDeviceGetComputeRunningProcesses`: how
//!   many compute processes hold a context. Best effort: where the call fails the sample
//!   is left out and the poll goes on.
//!
//! This is board power: [`Scope::Component`], never added to a wall reading. An idle GPU
//! with a process holding a CUDA context draws much more than one without (77 W against
//! 119.6 W on the H200 in `tests/fixtures/gpu-h200/`), so the resident cost shows in
//! these samples.

use crate::SourceId;
use std::collections::BTreeSet;

use crate::{CollectError, Collector, Metric, Sample, Scope};

/// Sample source name, shared with [`super::nvidia_smi`] (the same readings by another road).
pub const SOURCE: SourceId = SourceId::Gpu;

const MJ_PER_WH: f64 = 3.6e6;

/// nvml.h `nvmlReturn_t` values the collector acts on.
pub mod code {
    pub const UNINITIALIZED: i32 = 1;
    pub const NOT_SUPPORTED: i32 = 3;
    pub const NO_PERMISSION: i32 = 4;
    pub const INSUFFICIENT_SIZE: i32 = 7;
    pub const DRIVER_NOT_LOADED: i32 = 9;
    pub const GPU_IS_LOST: i32 = 15;
    pub const LIB_RM_VERSION_MISMATCH: i32 = 18;
}

fn on_gpu(index: Option<u32>) -> String {
    index.map(|i| format!(" on gpu{i}")).unwrap_or_default()
}

/// What goes wrong loading or asking NVML.
#[derive(Debug, thiserror::Error)]
pub enum NvmlError {
    #[error(
        "cannot load {library} ({detail}): no NVIDIA driver on this machine, GPU power is \
         not collected"
    )]
    LibraryMissing { library: String, detail: String },
    #[error("{library} has no {symbol} (driver older than NVML v2?): {detail}")]
    MissingSymbol {
        library: String,
        symbol: &'static str,
        detail: String,
    },
    #[error("NVML sees no GPUs")]
    NoGpus,
    #[error("{call}{}: {message} (NVML return code {code})", on_gpu(*.index))]
    Call {
        call: &'static str,
        index: Option<u32>,
        code: i32,
        message: String,
    },
}

impl NvmlError {
    /// The NVML return code, where NVML gave one.
    pub fn code(&self) -> Option<i32> {
        match self {
            NvmlError::Call { code, .. } => Some(*code),
            _ => None,
        }
    }

    fn is_not_supported(&self) -> bool {
        self.code() == Some(code::NOT_SUPPORTED)
    }
}

impl From<NvmlError> for CollectError {
    fn from(e: NvmlError) -> Self {
        let source_name = SOURCE.to_string();
        let detail = e.to_string();
        match e.code() {
            None
            | Some(
                code::DRIVER_NOT_LOADED
                | code::LIB_RM_VERSION_MISMATCH
                | code::NO_PERMISSION
                | code::NOT_SUPPORTED,
            ) => CollectError::Unavailable {
                source_name,
                detail,
            },
            // The GPU fell off the bus or the driver was reloaded: handles are stale.
            Some(code::GPU_IS_LOST | code::UNINITIALIZED) => CollectError::Gone {
                source_name,
                detail,
            },
            Some(_) => CollectError::Failed {
                source_name,
                detail,
            },
        }
    }
}

/// The NVML calls wattson makes, one GPU at a time by NVML index. Units as NVML gives them.
pub trait GpuApi: Send {
    /// Number of GPUs.
    fn count(&mut self) -> Result<u32, NvmlError>;
    /// Product name, e.g. `NVIDIA H200`.
    fn name(&mut self, index: u32) -> Result<String, NvmlError>;
    /// Board power, milliwatts.
    fn power_mw(&mut self, index: u32) -> Result<u32, NvmlError>;
    /// Energy since the driver loaded, millijoules.
    fn energy_mj(&mut self, index: u32) -> Result<u64, NvmlError>;
    /// Performance state, 0 (P0) ..= 15.
    fn pstate(&mut self, index: u32) -> Result<u32, NvmlError>;
    /// GPU (kernel) utilisation over the driver's sample period, percent.
    fn utilisation_pct(&mut self, index: u32) -> Result<u32, NvmlError>;
    /// SM clock, MHz.
    fn sm_clock_mhz(&mut self, index: u32) -> Result<u32, NvmlError>;
    /// Compute processes holding a context on the GPU, a count. Not Supported unless an
    /// implementation says otherwise.
    fn compute_processes(&mut self, index: u32) -> Result<u32, NvmlError> {
        Err(NvmlError::Call {
            call: "nvmlDeviceGetComputeRunningProcesses",
            index: Some(index),
            code: code::NOT_SUPPORTED,
            message: "Not Supported".to_owned(),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Reading {
    Power,
    Energy,
    PState,
    Utilisation,
    Clock,
    Processes,
}

const READINGS: [Reading; 6] = [
    Reading::Power,
    Reading::Energy,
    Reading::PState,
    Reading::Utilisation,
    Reading::Clock,
    Reading::Processes,
];

/// One GPU as found at construction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    pub index: u32,
    /// `gpu<index>`.
    pub channel: String,
    /// Product name; empty where NVML would not say.
    pub name: String,
}

struct GpuState {
    gpu: Gpu,
    /// Readings this GPU answered Not Supported for: never asked again.
    unsupported: BTreeSet<Reading>,
}

/// Polls every GPU NVML sees.
pub struct NvmlCollector {
    api: Box<dyn GpuApi>,
    gpus: Vec<GpuState>,
}

impl std::fmt::Debug for NvmlCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gpus: Vec<&Gpu> = self.gpus.iter().map(|g| &g.gpu).collect();
        f.debug_struct("NvmlCollector")
            .field("gpus", &gpus)
            .finish_non_exhaustive()
    }
}

impl NvmlCollector {
    /// What NVML power readings measure: one GPU board.
    pub const SCOPE: Scope = Scope::Component;

    /// Load `libnvidia-ml.so.1` and find the GPUs. Without the driver this fails with
    /// [`NvmlError::LibraryMissing`], which converts to [`CollectError::Unavailable`].
    pub fn new() -> Result<Self, NvmlError> {
        Self::with_api(Box::new(super::nvml_ffi::Nvml::open()?))
    }

    /// As [`NvmlCollector::new`], over any [`GpuApi`] (tests, another library path).
    pub fn with_api(mut api: Box<dyn GpuApi>) -> Result<Self, NvmlError> {
        let count = api.count()?;
        if count == 0 {
            return Err(NvmlError::NoGpus);
        }
        let gpus = (0..count)
            .map(|index| GpuState {
                gpu: Gpu {
                    index,
                    channel: crate::source::channel::gpu(index),
                    name: api.name(index).unwrap_or_default(),
                },
                unsupported: BTreeSet::new(),
            })
            .collect();
        Ok(NvmlCollector { api, gpus })
    }

    /// The GPUs found at construction, in NVML index order.
    pub fn gpus(&self) -> impl Iterator<Item = &Gpu> {
        self.gpus.iter().map(|g| &g.gpu)
    }

    pub fn scope(&self) -> Scope {
        Self::SCOPE
    }
}

fn read(api: &mut dyn GpuApi, reading: Reading, index: u32) -> Result<(Metric, f64), NvmlError> {
    Ok(match reading {
        Reading::Power => (Metric::Power, f64::from(api.power_mw(index)?) / 1e3),
        Reading::Energy => (
            Metric::EnergyCounter,
            api.energy_mj(index)? as f64 / MJ_PER_WH,
        ),
        Reading::PState => (Metric::PState, f64::from(api.pstate(index)?)),
        Reading::Utilisation => (
            Metric::GpuUtilisation,
            f64::from(api.utilisation_pct(index)?) / 100.0,
        ),
        Reading::Clock => (Metric::GpuClock, f64::from(api.sm_clock_mhz(index)?)),
        Reading::Processes => (
            Metric::GpuProcesses,
            f64::from(api.compute_processes(index)?),
        ),
    })
}

impl Collector for NvmlCollector {
    fn source(&self) -> &SourceId {
        &SOURCE
    }

    fn scope(&self) -> Option<Scope> {
        Some(Self::SCOPE)
    }

    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        let mut out = Vec::with_capacity(self.gpus.len() * READINGS.len());
        let mut first_err: Option<CollectError> = None;
        for g in &mut self.gpus {
            for reading in READINGS {
                if g.unsupported.contains(&reading) {
                    continue;
                }
                match read(self.api.as_mut(), reading, g.gpu.index) {
                    Ok((metric, value)) => out.push(Sample::new(
                        now_ms,
                        SOURCE,
                        metric,
                        g.gpu.channel.as_str(),
                        value,
                    )),
                    Err(e) if reading == Reading::Processes && !e.is_not_supported() => {
                        // The process list is an extra: a failed query (a container
                        // that may not see other PIDs, a busy driver) leaves the count
                        // out and never fails the poll.
                        tracing::debug!(
                            "{SOURCE}: {}; process count left out",
                            crate::ErrorChain(&e)
                        );
                    }
                    Err(e) if e.is_not_supported() => {
                        // Once per reading per GPU: e.g. the energy counter before Volta.
                        tracing::info!("{SOURCE}: {}; not asking again", crate::ErrorChain(&e));
                        g.unsupported.insert(reading);
                    }
                    Err(e) => {
                        let err = CollectError::from(e);
                        if matches!(err, CollectError::Gone { .. }) {
                            return Err(err);
                        }
                        first_err.get_or_insert(err);
                    }
                }
            }
        }
        match first_err {
            Some(e) if out.is_empty() => Err(e),
            Some(e) => {
                tracing::debug!("{}", crate::ErrorChain(&e));
                Ok(out)
            }
            None => Ok(out),
        }
    }
}
