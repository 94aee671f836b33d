//! Finding a GPU at run time and reading the properties the strategies are sized from.
//!
//! Nothing CUDA is needed to build grouper: `cudarc` loads `libcuda` and `libnvrtc` when
//! [`Gpu::get`] is first called. Every way this can fail (no library, no device, a driver error)
//! becomes [`GrouperError::GpuUnavailable`] with the reason, which `--backend auto` reports in
//! `--explain` before running on the CPU and `--backend gpu` shows as its error.

use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::sys::{
    CU_MEMHOSTALLOC_DEVICEMAP, CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTALLOC_WRITECOMBINED,
};
use cudarc::driver::{CudaContext, CudaStream, DriverError, PinnedHostSlice};

use grouper_core::error::{GrouperError, Result};

/// The properties of one device that planning and code generation read (never constants of
/// one GPU: Rosenfeld measured settings tuned for one GPU running 21x slower on another).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub sms: u32,
    /// L2 cache bytes.
    pub l2_bytes: u64,
    /// Shared memory a block may use after opting in, bytes.
    pub shared_per_block: u32,
    /// Shared memory per multiprocessor, bytes.
    pub shared_per_sm: u32,
    /// Resident threads per multiprocessor.
    pub threads_per_sm: u32,
    /// Resident blocks per multiprocessor.
    pub blocks_per_sm: u32,
    /// Threads one block may have.
    pub threads_per_block: u32,
    /// Device memory, bytes.
    pub memory_bytes: u64,
    /// CUDA driver version (e.g. 13000).
    pub driver_version: i32,
}

impl DeviceInfo {
    /// The launch shapes the tuner searches on this device.
    pub fn tuning_space(&self) -> grouper_core::tune::Space {
        grouper_core::tune::Space::for_device(self.blocks_per_sm, self.threads_per_block)
    }

    /// The share of a query's rows one key may take before atomics on it, in one table in
    /// device memory, cost more than streaming the input: the hot address is served by one
    /// L2 slice at a fixed rate, while the rows the device streams grow with its
    /// multiprocessors. 1 / (8 · SMs): on an H100 (132 SMs) 0.095% — between uniform 2^12
    /// groups (0.024% a key; the global table won, `bench regret`) and 2^10 (0.1%; it ran 4×
    /// slower than per-block tables), and far below zipf(1.1)'s hottest key (~10%).
    pub fn hot_key_share(&self) -> f64 {
        1.0 / (8.0 * self.sms.max(1) as f64)
    }

    /// The NVRTC target for this device's real architecture, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}

/// An open device: its context, a stream, and its properties.
pub struct Gpu {
    /// The primary context of device 0.
    pub ctx: Arc<CudaContext>,
    /// The stream every launch and copy of this process goes through.
    pub stream: Arc<CudaStream>,
    /// What the device is.
    pub info: DeviceInfo,
}

fn driver(what: &str, e: DriverError) -> GrouperError {
    GrouperError::GpuUnavailable(format!("{what}: {e}"))
}

/// Whether the CUDA driver library can be loaded (false on machines without an NVIDIA driver).
fn driver_library_present() -> bool {
    // SAFETY: only tries to dlopen libcuda under its usual names; no symbol is called.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Whether the NVRTC library can be loaded.
pub(crate) fn nvrtc_library_present() -> bool {
    // SAFETY: only tries to dlopen libnvrtc under its usual names; no symbol is called.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

fn driver_version() -> Result<i32> {
    let mut v = 0i32;
    // SAFETY: the driver library is loaded (checked by the caller) and `v` is a valid out-pointer.
    let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    r.result().map_err(|e| driver("cuDriverGetVersion", e))?;
    Ok(v)
}

/// Why there is no GPU when the driver library is missing.
pub const NO_DRIVER: &str =
    "the CUDA driver library (libcuda.so) was not found; install an NVIDIA driver";

/// The installed CUDA driver's version, without initializing the driver: loads libcuda and asks
/// its version (about a millisecond; no `cuInit`, which takes 0.1–0.2 s on an H100, and no
/// context, another 0.1 s). `None` when there is no driver. What a session checks before it
/// trusts device facts cached on disk.
pub fn installed_driver() -> Option<i32> {
    driver_library_present().then(driver_version)?.ok()
}

/// Initializes the driver and returns the number of devices, or why there are none.
fn device_count() -> Result<usize> {
    if !driver_library_present() {
        return Err(GrouperError::GpuUnavailable(NO_DRIVER.into()));
    }
    cudarc::driver::result::init().map_err(|e| driver("CUDA driver initialization failed", e))?;
    let n = CudaContext::device_count().map_err(|e| driver("cuDeviceGetCount", e))?;
    if n <= 0 {
        return Err(GrouperError::GpuUnavailable(
            "the CUDA driver reports no device".into(),
        ));
    }
    Ok(n as usize)
}

fn read_info(ctx: &CudaContext, driver_version: i32) -> Result<DeviceInfo> {
    let attr = |a: Attr| {
        ctx.attribute(a)
            .map_err(|e| driver("cuDeviceGetAttribute", e))
    };
    Ok(DeviceInfo {
        ordinal: ctx.ordinal(),
        name: ctx.name().map_err(|e| driver("cuDeviceGetName", e))?,
        compute_capability: ctx
            .compute_capability()
            .map_err(|e| driver("compute capability", e))?,
        sms: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
        l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64,
        shared_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u32,
        shared_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)? as u32,
        threads_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)? as u32,
        blocks_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)? as u32,
        threads_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u32,
        memory_bytes: ctx.total_mem().map_err(|e| driver("cuDeviceTotalMem", e))? as u64,
        driver_version,
    })
}

/// Every GPU the driver sees, or why there is none.
pub fn list() -> Result<Vec<DeviceInfo>> {
    let n = device_count()?;
    let version = driver_version()?;
    (0..n)
        .map(|i| {
            let ctx = CudaContext::new(i).map_err(|e| driver("cuCtxCreate", e))?;
            read_info(&ctx, version)
        })
        .collect()
}

impl Gpu {
    /// The process's GPU (device 0), opened once; the same error every time if there is none.
    pub fn get() -> Result<Arc<Gpu>> {
        static GPU: OnceLock<std::result::Result<Arc<Gpu>, String>> = OnceLock::new();
        GPU.get_or_init(|| Gpu::open().map(Arc::new).map_err(|e| e.to_string()))
            .clone()
            .map_err(|reason| {
                GrouperError::GpuUnavailable(
                    reason
                        .strip_prefix("no GPU available: ")
                        .unwrap_or(&reason)
                        .to_string(),
                )
            })
    }

    fn open() -> Result<Gpu> {
        grouper_core::trace::event(|| "GPU context: starting".into());
        device_count()?;
        if !nvrtc_library_present() {
            return Err(GrouperError::GpuUnavailable(
                "the NVRTC library (libnvrtc.so) was not found; add the CUDA toolkit's lib64 to LD_LIBRARY_PATH".into(),
            ));
        }
        let version = driver_version()?;
        let ctx = CudaContext::new(0).map_err(|e| driver("cuCtxCreate", e))?;
        let info = read_info(&ctx, version)?;
        if info.compute_capability.0 < 7 {
            return Err(GrouperError::GpuUnavailable(format!(
                "{} has compute capability {}.{}; grouper needs 7.0 or newer",
                info.name, info.compute_capability.0, info.compute_capability.1
            )));
        }
        let stream = ctx.new_stream().map_err(|e| driver("cuStreamCreate", e))?;
        grouper_core::trace::event(|| format!("GPU context ready ({})", info.name));
        Ok(Gpu { ctx, stream, info })
    }
}

/// Whether GPU tests must fail instead of skipping when no device is found
/// (`GROUPER_REQUIRE_GPU=1`, set by the device scripts).
pub fn gpu_required() -> bool {
    std::env::var("GROUPER_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

impl Gpu {
    /// The device's copy rate in bytes per second: a large device-to-device copy, bytes read
    /// plus bytes written (the roofline every aggregation kernel is measured against).
    pub fn copy_rate(&self) -> Result<f64> {
        let bytes = 1usize << 30;
        let src = self
            .stream
            .alloc_zeros::<u8>(bytes)
            .map_err(timing_err("allocating"))?;
        let mut dst = self
            .stream
            .alloc_zeros::<u8>(bytes)
            .map_err(timing_err("allocating"))?;
        let ms = self.best_of_5(&mut || self.stream.memcpy_dtod(&src, &mut dst))?;
        Ok(2.0 * bytes as f64 / (ms * 1e-3))
    }

    /// Host-to-device bytes per second from pinned memory (best of 5 copies of 1 GiB): the
    /// ceiling of the streaming pipeline.
    pub fn pinned_h2d_rate(&self) -> Result<f64> {
        let bytes = 1usize << 30;
        let mut host = alloc_pinned(self, bytes)?;
        host.as_mut_slice()
            .map_err(timing_err("writing pinned memory"))?
            .fill(7);
        // SAFETY: written by the copy below before anything reads it.
        let mut dst =
            unsafe { self.stream.alloc::<u8>(bytes) }.map_err(timing_err("allocating"))?;
        let ms = self.best_of_5(&mut || self.stream.memcpy_htod(&host, &mut dst))?;
        Ok(bytes as f64 / (ms * 1e-3))
    }

    /// The fastest of five runs of `copy` on the device's stream, ms (CUDA events).
    fn best_of_5(
        &self,
        copy: &mut dyn FnMut() -> std::result::Result<(), DriverError>,
    ) -> Result<f64> {
        use cudarc::driver::sys::CUevent_flags;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let (a, b) = (
            self.ctx.new_event(timing).map_err(timing_err("event"))?,
            self.ctx.new_event(timing).map_err(timing_err("event"))?,
        );
        let mut best = f64::MAX;
        for _ in 0..5 {
            a.record(&self.stream).map_err(timing_err("event"))?;
            copy().map_err(timing_err("copying"))?;
            b.record(&self.stream).map_err(timing_err("event"))?;
            self.stream.synchronize().map_err(timing_err("copying"))?;
            best = best.min(a.elapsed_ms(&b).map_err(timing_err("event"))? as f64);
        }
        Ok(best)
    }
}

fn timing_err(what: &'static str) -> impl Fn(DriverError) -> GrouperError {
    move |e| GrouperError::Gpu(format!("{what}: {e}"))
}

/// Maps a driver error to ours, naming what failed.
pub(crate) fn gpu_err(what: &'static str) -> impl Fn(DriverError) -> GrouperError {
    move |e| {
        let text = e.to_string();
        if text.contains("OUT_OF_MEMORY") {
            GrouperError::Gpu(format!("{what}: out of GPU memory"))
        } else {
            GrouperError::Gpu(format!("{what}: {text}"))
        }
    }
}

/// Page-locked host memory, mapped into the device's address space (zero-copy reads) and
/// write-combined (the CPU only writes it).
pub fn alloc_pinned(gpu: &Gpu, bytes: usize) -> Result<PinnedHostSlice<u8>> {
    let flags =
        CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_WRITECOMBINED;
    // SAFETY: the memory is uninitialised; every image is written in full (`ImageLayout::fill`
    // writes each region it lays out) before a copy or a kernel reads it.
    unsafe { gpu.ctx.alloc_pinned_with_flags::<u8>(bytes.max(8), flags) }
        .map_err(gpu_err("allocating pinned host memory"))
}
