//! Run-time compilation of generated kernels with NVRTC, cached in memory and on disk.
//!
//! Kernels are CUDA C generated per query ([`crate::codegen`]) and compiled for the device's
//! real architecture (`--gpu-architecture=sm_XY`). A compile costs ~100 ms, a query on resident
//! data a few, so modules are cached: in memory for the process, and as PTX on disk keyed by a
//! hash of (source, architecture, driver version) so that repeated runs skip NVRTC entirely.
//! Compile time is reported separately from run time; `GROUPER_TRACE=1` puts each compile's
//! NVRTC and module-load (driver JIT) times on the timeline ([`grouper_core::trace`]).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;

use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions, Ptx};

use crate::device::Gpu;
use grouper_core::error::{GrouperError, Result};

/// A loaded module and how long getting it took.
#[derive(Clone)]
pub struct Compiled {
    module: Arc<CudaModule>,
    /// Milliseconds spent in NVRTC and module load, or waiting for another caller's (about 0
    /// when served from the memory cache).
    pub compile_ms: f64,
    /// Where it came from.
    pub source: CacheHit,
}

/// Which cache served a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheHit {
    /// Compiled now with NVRTC.
    Compiled,
    /// PTX read from the disk cache.
    Disk,
    /// Already loaded in this process.
    Memory,
}

impl Compiled {
    /// A kernel of the module.
    pub fn function(&self, name: &str) -> Result<CudaFunction> {
        self.module
            .load_function(name)
            .map_err(|e| GrouperError::Gpu(format!("kernel {name} not found: {e}")))
    }
}

fn cache_key(src: &str, arch: &str, driver: i32) -> u64 {
    let mut h = DefaultHasher::new();
    (src, arch, driver, env!("CARGO_PKG_VERSION")).hash(&mut h);
    h.finish()
}

/// The on-disk cache folder: `$GROUPER_CACHE_DIR`, else `$XDG_CACHE_HOME/grouper/kernels`, else
/// `~/.cache/grouper/kernels`; `None` when none can be named.
fn disk_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("GROUPER_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("grouper").join("kernels"))
}

/// One module of the memory cache: filled by the first caller, whom later callers for the same
/// source wait for (a kernel warmed in the background is compiled once, not twice).
type Slot = Arc<Mutex<Option<Arc<CudaModule>>>>;

/// Compiles (or fetches) `src` for `gpu`'s architecture and loads it.
pub fn compile(gpu: &Gpu, src: &str) -> Result<Compiled> {
    static MEMORY: OnceLock<Mutex<HashMap<u64, Slot>>> = OnceLock::new();
    let arch = gpu.info.arch();
    let key = cache_key(src, &arch, gpu.info.driver_version);
    let slot: Slot = Arc::clone(
        MEMORY
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_default(),
    );
    // Time waited for another caller compiling the same source counts as compile time.
    let start = Instant::now();
    let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(m) = slot.as_ref() {
        return Ok(Compiled {
            module: Arc::clone(m),
            compile_ms: start.elapsed().as_secs_f64() * 1e3,
            source: CacheHit::Memory,
        });
    }
    let path = disk_dir().map(|d| d.join(format!("{key:016x}.ptx")));
    let load = |ptx: Ptx| {
        gpu.ctx
            .load_module(ptx)
            .map_err(|e| GrouperError::Gpu(format!("loading the compiled kernels failed: {e}")))
    };
    let cached = path.as_ref().and_then(|p| std::fs::read_to_string(p).ok());
    // A cached module that does not load (a file cut short, say) is compiled again.
    let from_disk = cached.and_then(|text| load(Ptx::from_src(text)).ok());
    let (module, hit) = match from_disk {
        Some(m) => {
            grouper_core::trace::event(|| {
                format!(
                    "compile: loaded from the disk cache in {:.1} ms",
                    start.elapsed().as_secs_f64() * 1e3
                )
            });
            (m, CacheHit::Disk)
        }
        None => {
            let ptx = nvrtc(src, &arch)?;
            let text = ptx.to_src();
            let compiled = start.elapsed();
            if let Some(p) = &path {
                // The disk cache is an optimisation: failing to write it is not an error.
                let _ = write_whole(p, &text);
            }
            let module = load(ptx)?;
            grouper_core::trace::event(|| {
                format!(
                    "compile: NVRTC {:.1} ms, module load (the driver's PTX JIT) {:.1} ms, {} bytes of PTX",
                    compiled.as_secs_f64() * 1e3,
                    (start.elapsed() - compiled).as_secs_f64() * 1e3,
                    text.len()
                )
            });
            (module, CacheHit::Compiled)
        }
    };
    *slot = Some(Arc::clone(&module));
    Ok(Compiled {
        module,
        compile_ms: start.elapsed().as_secs_f64() * 1e3,
        source: hit,
    })
}

/// Writes `text` to `path` through a temporary file and a rename, so that a process stopped
/// mid-write (or another writing the same entry) never leaves a partial entry behind.
fn write_whole(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// NVRTC itself; a failure carries the compiler's log.
fn nvrtc(src: &str, arch: &str) -> Result<Ptx> {
    if std::env::var("GROUPER_INJECT_NVRTC_FAILURE").is_ok_and(|v| v == "1") {
        return Err(GrouperError::Gpu(
            "kernel compilation failed (injected by GROUPER_INJECT_NVRTC_FAILURE)".into(),
        ));
    }
    let opts = CompileOptions {
        options: vec![
            format!("--gpu-architecture={arch}"),
            "--std=c++17".into(),
            "--device-int128".into(),
            "-default-device".into(),
        ],
        name: Some("grouper.cu".into()),
        ..Default::default()
    };
    compile_ptx_with_opts(src, opts).map_err(|e| match e {
        CompileError::CompileError { log, .. } => {
            // The first errors, on one line: the log of a broken kernel can run for pages.
            let log = log.to_string_lossy();
            let errors: Vec<&str> = log.lines().filter(|l| l.contains("error")).collect();
            let shown: Vec<&str> = errors.iter().take(3).copied().collect();
            GrouperError::Gpu(format!(
                "kernel compilation failed ({} errors): {}",
                errors.len(),
                shown.join(" | ")
            ))
        }
        other => GrouperError::Gpu(format!("kernel compilation failed: {other}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_entry_is_written_whole_and_leaves_nothing_beside_it() {
        let dir = std::env::temp_dir().join(format!("grouper-cache-test-{}", std::process::id()));
        let path = dir.join("sub").join("abc.ptx");
        write_whole(&path, "first").unwrap();
        write_whole(&path, "second version").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second version");
        let names: Vec<_> = std::fs::read_dir(dir.join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("abc.ptx")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
