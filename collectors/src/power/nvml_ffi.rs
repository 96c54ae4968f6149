//! The one place wattson calls C: NVML (`libnvidia-ml.so.1`, NVIDIA Management Library,
//! nvml.h from the CUDA toolkit / driver), loaded at run time with `libloading` so that
//! wattson neither builds nor runs against the driver on machines without one.
//!
//! Units as NVML gives them: power in milliwatts, energy in millijoules since the driver
//! was loaded, clocks in MHz, utilisation in percent, P-states as 0..=15.
#![allow(unsafe_code)]

use std::ffi::{CStr, c_char, c_int, c_uint, c_ulonglong, c_void};

use super::nvml::{GpuApi, NvmlError, code};

/// The soname the driver package installs (the unversioned `libnvidia-ml.so` is only in
/// the development package).
pub const LIBRARY: &str = "libnvidia-ml.so.1";

type Device = *mut c_void;
type Ret = c_int;

/// nvml.h `nvmlUtilization_t`.
#[repr(C)]
#[derive(Default)]
struct Utilization {
    gpu: c_uint,
    memory: c_uint,
}

/// nvml.h `NVML_CLOCK_SM`.
const CLOCK_SM: c_int = 1;
/// nvml.h `NVML_DEVICE_NAME_V2_BUFFER_SIZE`.
const NAME_LEN: usize = 96;

struct Fns {
    init: unsafe extern "C" fn() -> Ret,
    shutdown: unsafe extern "C" fn() -> Ret,
    error_string: unsafe extern "C" fn(Ret) -> *const c_char,
    count: unsafe extern "C" fn(*mut c_uint) -> Ret,
    handle: unsafe extern "C" fn(c_uint, *mut Device) -> Ret,
    name: unsafe extern "C" fn(Device, *mut c_char, c_uint) -> Ret,
    power: unsafe extern "C" fn(Device, *mut c_uint) -> Ret,
    energy: unsafe extern "C" fn(Device, *mut c_ulonglong) -> Ret,
    pstate: unsafe extern "C" fn(Device, *mut c_int) -> Ret,
    utilization: unsafe extern "C" fn(Device, *mut Utilization) -> Ret,
    clock: unsafe extern "C" fn(Device, c_int, *mut c_uint) -> Ret,
    /// `nvmlDeviceGetComputeRunningProcesses{_v3,_v2,}` with the symbol found; `None` on a
    /// driver that has none. Only ever called with a zero-length array (`infos` NULL), so
    /// the per-version layout of `nvmlProcessInfo_t` never matters.
    processes: Option<(&'static str, ProcessesFn)>,
}

/// `nvmlReturn_t f(nvmlDevice_t, unsigned int *infoCount, nvmlProcessInfo_t *infos)`, the
/// same shape in v1, v2 and v3.
type ProcessesFn = unsafe extern "C" fn(Device, *mut c_uint, *mut c_void) -> Ret;

/// Newest first: v3 (driver 510+), v2 (470+), the original.
const PROCESSES_SYMBOLS: [&str; 3] = [
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses",
];

/// NVML, initialised, with one handle per GPU. Shut down on drop.
pub struct Nvml {
    fns: Fns,
    devices: Vec<Device>,
    library: String,
    initialised: bool,
    // Dropped last: every pointer in `fns` points into it.
    _lib: libloading::Library,
}

// SAFETY: NVML is documented thread-safe ("it is safe to make simultaneous NVML calls from
// multiple threads", nvml.h), device handles are opaque tokens valid until nvmlShutdown,
// and `Nvml` is only used through `&mut self`, so moving it to another thread is sound.
unsafe impl Send for Nvml {}

impl std::fmt::Debug for Nvml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvml")
            .field("library", &self.library)
            .field("gpus", &self.devices.len())
            .finish_non_exhaustive()
    }
}

/// Look up `symbol` and copy out its function pointer.
///
/// # Safety
/// `T` must be the symbol's true C signature.
unsafe fn sym<T: Copy>(
    lib: &libloading::Library,
    library: &str,
    symbol: &'static str,
) -> Result<T, NvmlError> {
    let mut name = symbol.as_bytes().to_vec();
    name.push(0);
    // SAFETY: the caller guarantees `T` matches the C declaration in nvml.h; the pointer is
    // only called while `lib` is alive (both live in `Nvml`, `_lib` dropped last).
    unsafe { lib.get::<T>(&name) }
        .map(|s| *s)
        .map_err(|e| NvmlError::MissingSymbol {
            library: library.to_owned(),
            symbol,
            detail: e.to_string(),
        })
}

impl Nvml {
    /// Load [`LIBRARY`] from the dynamic loader's search path and initialise NVML.
    pub fn open() -> Result<Self, NvmlError> {
        Self::open_at(LIBRARY)
    }

    /// Load NVML from `library` (a soname or a path) and initialise it.
    pub fn open_at(library: &str) -> Result<Self, NvmlError> {
        // SAFETY: loading a shared object runs its initialisers; libnvidia-ml's are the
        // driver's own and have no preconditions on the caller.
        let lib = unsafe { libloading::Library::new(library) }.map_err(|e| {
            NvmlError::LibraryMissing {
                library: library.to_owned(),
                detail: e.to_string(),
            }
        })?;
        // SAFETY: each signature below is copied from nvml.h (driver API v2 entry points).
        let fns = unsafe {
            Fns {
                init: sym(&lib, library, "nvmlInit_v2")?,
                shutdown: sym(&lib, library, "nvmlShutdown")?,
                error_string: sym(&lib, library, "nvmlErrorString")?,
                count: sym(&lib, library, "nvmlDeviceGetCount_v2")?,
                handle: sym(&lib, library, "nvmlDeviceGetHandleByIndex_v2")?,
                name: sym(&lib, library, "nvmlDeviceGetName")?,
                power: sym(&lib, library, "nvmlDeviceGetPowerUsage")?,
                energy: sym(&lib, library, "nvmlDeviceGetTotalEnergyConsumption")?,
                pstate: sym(&lib, library, "nvmlDeviceGetPerformanceState")?,
                utilization: sym(&lib, library, "nvmlDeviceGetUtilizationRates")?,
                clock: sym(&lib, library, "nvmlDeviceGetClockInfo")?,
                processes: PROCESSES_SYMBOLS.iter().find_map(|&name| {
                    sym::<ProcessesFn>(&lib, library, name)
                        .ok()
                        .map(|f| (name, f))
                }),
            }
        };
        let mut nvml = Nvml {
            fns,
            devices: Vec::new(),
            library: library.to_owned(),
            initialised: false,
            _lib: lib,
        };
        // SAFETY: nvmlInit_v2 takes no arguments; it may be called from any thread.
        let ret = unsafe { (nvml.fns.init)() };
        nvml.check("nvmlInit_v2", None, ret)?;
        nvml.initialised = true;
        let mut count: c_uint = 0;
        // SAFETY: `count` is a valid out-pointer for the duration of the call.
        let ret = unsafe { (nvml.fns.count)(&raw mut count) };
        nvml.check("nvmlDeviceGetCount_v2", None, ret)?;
        for index in 0..count {
            let mut device: Device = std::ptr::null_mut();
            // SAFETY: `index` < count and `device` is a valid out-pointer.
            let ret = unsafe { (nvml.fns.handle)(index, &raw mut device) };
            nvml.check("nvmlDeviceGetHandleByIndex_v2", Some(index), ret)?;
            nvml.devices.push(device);
        }
        Ok(nvml)
    }

    fn check(&self, call: &'static str, index: Option<u32>, ret: Ret) -> Result<(), NvmlError> {
        if ret == 0 {
            return Ok(());
        }
        // SAFETY: nvmlErrorString accepts any code and returns a pointer to a static,
        // NUL-terminated string (or NULL, checked below).
        let ptr = unsafe { (self.fns.error_string)(ret) };
        let message = if ptr.is_null() {
            "unknown error".to_owned()
        } else {
            // SAFETY: non-null, NUL-terminated and static per nvml.h.
            unsafe { CStr::from_ptr(ptr) }
                .to_string_lossy()
                .into_owned()
        };
        Err(NvmlError::Call {
            call,
            index,
            code: ret,
            message,
        })
    }

    fn device(&self, index: u32) -> Result<Device, NvmlError> {
        self.devices
            .get(index as usize)
            .copied()
            .ok_or(NvmlError::Call {
                call: "device index",
                index: Some(index),
                code: 2,
                message: "no such GPU".to_owned(),
            })
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        if self.initialised {
            // SAFETY: paired with the one successful nvmlInit_v2 in `open_at`; no handle
            // outlives `self`.
            let _ = unsafe { (self.fns.shutdown)() };
        }
    }
}

impl GpuApi for Nvml {
    fn count(&mut self) -> Result<u32, NvmlError> {
        Ok(self.devices.len() as u32)
    }

    fn name(&mut self, index: u32) -> Result<String, NvmlError> {
        let device = self.device(index)?;
        let mut buf = [0 as c_char; NAME_LEN];
        // SAFETY: `buf` holds NAME_LEN bytes and NVML writes at most `length` including NUL.
        let ret = unsafe { (self.fns.name)(device, buf.as_mut_ptr(), NAME_LEN as c_uint) };
        self.check("nvmlDeviceGetName", Some(index), ret)?;
        // SAFETY: on success NVML wrote a NUL-terminated string into `buf`.
        let name = unsafe { CStr::from_ptr(buf.as_ptr()) };
        Ok(name.to_string_lossy().into_owned())
    }

    fn power_mw(&mut self, index: u32) -> Result<u32, NvmlError> {
        let device = self.device(index)?;
        let mut mw: c_uint = 0;
        // SAFETY: valid handle from nvmlDeviceGetHandleByIndex_v2 and a valid out-pointer.
        let ret = unsafe { (self.fns.power)(device, &raw mut mw) };
        self.check("nvmlDeviceGetPowerUsage", Some(index), ret)?;
        Ok(mw)
    }

    fn energy_mj(&mut self, index: u32) -> Result<u64, NvmlError> {
        let device = self.device(index)?;
        let mut mj: c_ulonglong = 0;
        // SAFETY: valid handle and out-pointer.
        let ret = unsafe { (self.fns.energy)(device, &raw mut mj) };
        self.check("nvmlDeviceGetTotalEnergyConsumption", Some(index), ret)?;
        Ok(mj)
    }

    fn pstate(&mut self, index: u32) -> Result<u32, NvmlError> {
        let device = self.device(index)?;
        let mut state: c_int = 0;
        // SAFETY: valid handle and out-pointer (nvmlPstates_t is a C enum, int-sized).
        let ret = unsafe { (self.fns.pstate)(device, &raw mut state) };
        self.check("nvmlDeviceGetPerformanceState", Some(index), ret)?;
        u32::try_from(state)
            .ok()
            .filter(|s| *s <= 15)
            .ok_or(NvmlError::Call {
                call: "nvmlDeviceGetPerformanceState",
                index: Some(index),
                code: 999,
                message: format!("P-state {state} is unknown"),
            })
    }

    fn utilisation_pct(&mut self, index: u32) -> Result<u32, NvmlError> {
        let device = self.device(index)?;
        let mut util = Utilization::default();
        // SAFETY: valid handle and a pointer to a #[repr(C)] nvmlUtilization_t.
        let ret = unsafe { (self.fns.utilization)(device, &raw mut util) };
        self.check("nvmlDeviceGetUtilizationRates", Some(index), ret)?;
        let _ = util.memory;
        Ok(util.gpu)
    }

    fn sm_clock_mhz(&mut self, index: u32) -> Result<u32, NvmlError> {
        let device = self.device(index)?;
        let mut mhz: c_uint = 0;
        // SAFETY: valid handle, a valid nvmlClockType_t and out-pointer.
        let ret = unsafe { (self.fns.clock)(device, CLOCK_SM, &raw mut mhz) };
        self.check("nvmlDeviceGetClockInfo", Some(index), ret)?;
        Ok(mhz)
    }

    fn compute_processes(&mut self, index: u32) -> Result<u32, NvmlError> {
        let device = self.device(index)?;
        let Some((call, f)) = self.fns.processes else {
            return Err(NvmlError::Call {
                call: "nvmlDeviceGetComputeRunningProcesses",
                index: Some(index),
                code: code::NOT_SUPPORTED,
                message: "this driver's NVML has no such call".to_owned(),
            });
        };
        let mut count: c_uint = 0;
        // SAFETY: valid handle, a valid out-pointer, and a zero count with a NULL array:
        // NVML writes no entries, answers Success when there are none and Insufficient
        // Size with the count set when there are some (nvml.h; pynvml sizes it the same
        // way).
        let ret = unsafe { f(device, &raw mut count, std::ptr::null_mut()) };
        if ret == code::INSUFFICIENT_SIZE {
            return Ok(count);
        }
        self.check(call, Some(index), ret)?;
        Ok(count)
    }
}
