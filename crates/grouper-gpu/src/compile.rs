//! Run-time compilation of generated kernels with NVRTC, cached in memory and on disk.
//!
//! Kernels are CUDA C generated per query ([`crate::codegen`]) and compiled for the device's
//! real architecture (`--gpu-architecture=sm_XY`), straight to its machine code (CUBIN: no
//! second assembly by the driver when the module loads). A compile costs ~100 ms to ~1 s, a
//! query on resident data a few, so modules are cached: in memory for the process, and as
//! CUBIN on disk keyed by a hash of (source, architecture, driver version) so that repeated
//! runs skip NVRTC entirely. Compile time is reported separately from run time;
//! `GROUPER_TRACE=1` puts each compile's NVRTC and module-load times on the timeline
//! ([`grouper_core::trace`]).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;

use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::{self, Ptx};

use crate::device::{DeviceInfo, Gpu};
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
    /// Machine code (CUBIN) read from the disk cache.
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

/// The memory cache's slot of the module of key `key`.
fn slot(key: u64) -> Slot {
    static MEMORY: OnceLock<Mutex<HashMap<u64, Slot>>> = OnceLock::new();
    Arc::clone(
        MEMORY
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_default(),
    )
}

/// Compiles `src` for the device `info` describes into the disk cache, without a context
/// (NVRTC needs none; loading the module does). Run beside the GPU's start (cuInit and the
/// context, ~0.24 s on the H200 host), a kernel this machine has not compiled yet is compiled
/// meanwhile and [`compile`] then loads it from disk; it holds the module's slot, so a
/// [`compile`] of the same source waits for it rather than compiling it twice. Nothing when
/// this process has loaded the kernel, it is on disk, or no disk cache folder can be named.
pub fn prebuild(info: &DeviceInfo, src: &str) -> Result<()> {
    let arch = info.arch();
    let key = cache_key(src, &arch, info.driver_version);
    let slot = slot(key);
    let loaded = slot.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(path) = disk_path(key).filter(|_| loaded.is_none()) else {
        return Ok(());
    };
    if read_cached(&path).is_none() {
        let start = Instant::now();
        compile_to_disk(src, &arch, Some(&path))?;
        grouper_core::trace::event(|| {
            format!(
                "compile: NVRTC {:.1} ms into the disk cache, with no context (prebuild)",
                start.elapsed().as_secs_f64() * 1e3
            )
        });
    }
    Ok(())
}

/// Where the disk cache keeps the CUBIN of key `key`; `None` when no folder can be named.
fn disk_path(key: u64) -> Option<PathBuf> {
    disk_dir().map(|d| d.join(format!("{key:016x}.cubin")))
}

/// The CUBIN the disk cache holds at `path`, if it is there and whole (a file cut short, say,
/// is not: it is compiled again).
fn read_cached(path: &std::path::Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok().and_then(|file| unsealed(&file))
}

/// NVRTC's CUBIN of `src` for `arch`, also written to the disk cache at `path`.
fn compile_to_disk(src: &str, arch: &str, path: Option<&std::path::Path>) -> Result<Vec<u8>> {
    let cubin = nvrtc(src, arch)?;
    if let Some(p) = path {
        // The disk cache is an optimisation: failing to write it is not an error.
        let _ = write_whole(p, sealed(&cubin));
    }
    Ok(cubin)
}

/// Compiles (or fetches) `src` for `gpu`'s architecture and loads it.
pub fn compile(gpu: &Gpu, src: &str) -> Result<Compiled> {
    let arch = gpu.info.arch();
    let key = cache_key(src, &arch, gpu.info.driver_version);
    let slot = slot(key);
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
    let path = disk_path(key);
    let load = |cubin: Vec<u8>| {
        gpu.ctx
            .load_module(Ptx::from_binary(cubin))
            .map_err(|e| GrouperError::Gpu(format!("loading the compiled kernels failed: {e}")))
    };
    let cached = path.as_deref().and_then(read_cached);
    let from_disk = cached.and_then(|cubin| load(cubin).ok());
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
            let cubin = compile_to_disk(src, &arch, path.as_deref())?;
            let compiled = start.elapsed();
            let bytes = cubin.len();
            let module = load(cubin)?;
            grouper_core::trace::event(|| {
                format!(
                    "compile: NVRTC {:.1} ms (to the device's SASS), module load {:.1} ms, {bytes} bytes of CUBIN",
                    compiled.as_secs_f64() * 1e3,
                    (start.elapsed() - compiled).as_secs_f64() * 1e3,
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
/// A CUBIN as the disk cache stores it: its length and hash before it, so that only a whole
/// one is ever loaded (the driver reads an ELF image by the sizes inside it, past the end of
/// one cut short).
fn sealed(cubin: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(cubin.len() + 16);
    out.extend_from_slice(&(cubin.len() as u64).to_le_bytes());
    out.extend_from_slice(&digest(cubin).to_le_bytes());
    out.extend_from_slice(cubin);
    out
}

/// The CUBIN in a [`sealed`] file, if it is whole.
fn unsealed(file: &[u8]) -> Option<Vec<u8>> {
    let word = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(file.get(at..at + 8)?.try_into().ok()?))
    };
    let (len, hash) = (word(0)?, word(8)?);
    let cubin = file.get(16..)?;
    (cubin.len() as u64 == len && digest(cubin) == hash).then(|| cubin.to_vec())
}

fn digest(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

fn write_whole(path: &std::path::Path, text: impl AsRef<[u8]>) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// NVRTC itself, to the device's own machine code (CUBIN: with a real architecture NVRTC runs
/// the assembler anyway, and a module loaded as PTX was assembled a second time by the
/// driver, 0.4–0.9 s for Q1's kernel on the H100); a failure carries the compiler's log.
pub(crate) fn nvrtc(src: &str, arch: &str) -> Result<Vec<u8>> {
    if std::env::var("GROUPER_INJECT_NVRTC_FAILURE").is_ok_and(|v| v == "1") {
        return Err(GrouperError::Gpu(
            "kernel compilation failed (injected by GROUPER_INJECT_NVRTC_FAILURE)".into(),
        ));
    }
    let options = [
        format!("--gpu-architecture={arch}"),
        "--std=c++17".into(),
        "--device-int128".into(),
        "-default-device".into(),
    ];
    let failed = |what: &str, e: nvrtc::result::NvrtcError| {
        GrouperError::Gpu(format!("kernel compilation failed ({what}): {e:?}"))
    };
    let src = std::ffi::CString::new(src)
        .map_err(|_| GrouperError::Gpu("a kernel source with a NUL byte".into()))?;
    let name = c"grouper.cu";
    let prog = nvrtc::result::create_program(&src, Some(name))
        .map_err(|e| failed("creating the program", e))?;
    let program = Program(prog);
    // SAFETY: `program.0` was made by create_program above and is destroyed only by
    // `Program`'s drop, after these calls; the buffers passed are sized by NVRTC's own size
    // queries.
    unsafe {
        if let Err(e) = nvrtc::result::compile_program(program.0, &options) {
            let log = nvrtc::result::get_program_log(program.0).unwrap_or_default();
            let log: Vec<u8> = log.iter().map(|&c| c as u8).collect();
            let log = String::from_utf8_lossy(&log);
            // The first errors, on one line: the log of a broken kernel can run for pages.
            let errors: Vec<&str> = log.lines().filter(|l| l.contains("error")).collect();
            let shown: Vec<&str> = errors.iter().take(3).copied().collect();
            return Err(GrouperError::Gpu(format!(
                "kernel compilation failed ({} errors, {e:?}): {}",
                errors.len(),
                shown.join(" | ")
            )));
        }
        let mut size = 0usize;
        nvrtc::sys::nvrtcGetCUBINSize(program.0, &mut size)
            .result()
            .map_err(|e| failed("sizing the CUBIN", e))?;
        let mut cubin = vec![0u8; size];
        nvrtc::sys::nvrtcGetCUBIN(program.0, cubin.as_mut_ptr().cast())
            .result()
            .map_err(|e| failed("reading the CUBIN", e))?;
        Ok(cubin)
    }
}

/// An NVRTC program, destroyed when dropped.
struct Program(nvrtc::sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: made by create_program and destroyed here only.
        let _ = unsafe { nvrtc::result::destroy_program(self.0) };
    }
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

    #[test]
    fn only_a_whole_cached_cubin_is_loaded() {
        let cubin: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let file = sealed(&cubin);
        assert_eq!(unsealed(&file), Some(cubin.clone()));
        for cut in [0, 7, 15, 16, 500, file.len() - 1] {
            assert_eq!(unsealed(&file[..cut]), None, "cut at {cut}");
        }
        let mut flipped = file.clone();
        flipped[600] ^= 1;
        assert_eq!(unsealed(&flipped), None);
        let mut longer = file;
        longer.push(0);
        assert_eq!(unsealed(&longer), None);
    }
}
