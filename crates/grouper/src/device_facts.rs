//! What a session knows of the GPU without starting it. Starting it costs a fresh process
//! about 0.35 s (H100, driver 580: `cuInit` 0.1–0.2 s, the primary context 0.1 s, and tearing
//! it down at exit), so `auto` must not pay that for a query that then runs on the CPU. The
//! device's properties are written to the cache directory (`device0.json`) whenever the GPU is
//! started ([`open`]); later processes read them ([`known`]) while the installed driver's
//! version — read without initializing the driver — still matches, and find the device profile
//! by them. The GPU itself starts only for a route that runs on it.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use grouper_gpu::{installed_driver, DeviceInfo, Gpu};
use serde_json::{json, Value};

use crate::profile_store::cache_dir;

/// Starts the GPU (once per process) and records its properties for later processes.
pub fn open() -> grouper_core::Result<Arc<Gpu>> {
    let gpu = Gpu::get()?;
    save(&gpu.info);
    Ok(gpu)
}

/// The GPU's properties as recorded by an earlier process on this machine, while its driver is
/// still the one installed; `None` otherwise (no driver, never started, or a new driver). Read
/// once per process: the session and every route's explanation ask for them.
pub fn known() -> Option<DeviceInfo> {
    static KNOWN: OnceLock<Option<DeviceInfo>> = OnceLock::new();
    KNOWN
        .get_or_init(|| {
            let driver = installed_driver()?;
            let text = std::fs::read_to_string(path()?).ok()?;
            from_json(&serde_json::from_str(&text).ok()?).filter(|i| i.driver_version == driver)
        })
        .clone()
}

/// What a session with `backend` aggregates on, in words: the GPU it finds and the CPU, or
/// why the CPU alone (the shell's and the server's first line, the Python package's `device`).
pub fn describe(backend: crate::Backend) -> String {
    use crate::Backend;
    match backend {
        Backend::Auto | Backend::Gpu | Backend::Hybrid => match grouper_gpu::device::list() {
            Ok(list) => match list.first() {
                Some(d) => format!("the GPU ({}) and the CPU", d.name),
                None => "the CPU (no GPU found)".into(),
            },
            Err(e) => format!(
                "the CPU (no GPU: {})",
                e.to_string().trim_start_matches("no GPU available: ")
            ),
        },
        Backend::Cpu => "the CPU".into(),
        Backend::DataFusion => "DataFusion's own aggregation".into(),
    }
}

fn path() -> Option<PathBuf> {
    cache_dir().map(|d| d.join("device0.json"))
}

/// Writes `info` unless the file already holds it. A cache that cannot be written only costs a
/// later process its profile until the GPU starts; it is not an error.
fn save(info: &DeviceInfo) {
    let Some(path) = path() else { return };
    let text = to_json(info).to_string();
    if std::fs::read_to_string(&path).is_ok_and(|t| t == text) {
        return;
    }
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(&path, text);
}

fn to_json(i: &DeviceInfo) -> Value {
    json!({
        "ordinal": i.ordinal,
        "name": i.name,
        "compute_capability": [i.compute_capability.0, i.compute_capability.1],
        "sms": i.sms,
        "l2_bytes": i.l2_bytes,
        "shared_per_block": i.shared_per_block,
        "shared_per_sm": i.shared_per_sm,
        "threads_per_sm": i.threads_per_sm,
        "blocks_per_sm": i.blocks_per_sm,
        "threads_per_block": i.threads_per_block,
        "memory_bytes": i.memory_bytes,
        "driver_version": i.driver_version,
    })
}

fn from_json(v: &Value) -> Option<DeviceInfo> {
    let u = |k: &str| v.get(k).and_then(Value::as_u64);
    let u32_of = |k: &str| u(k).and_then(|x| u32::try_from(x).ok());
    let cc = v.get("compute_capability")?.as_array()?;
    let cc_at = |n: usize| {
        cc.get(n)
            .and_then(Value::as_i64)
            .and_then(|x| i32::try_from(x).ok())
    };
    Some(DeviceInfo {
        ordinal: usize::try_from(u("ordinal")?).ok()?,
        name: v.get("name")?.as_str()?.to_string(),
        compute_capability: (cc_at(0)?, cc_at(1)?),
        sms: u32_of("sms")?,
        l2_bytes: u("l2_bytes")?,
        shared_per_block: u32_of("shared_per_block")?,
        shared_per_sm: u32_of("shared_per_sm")?,
        threads_per_sm: u32_of("threads_per_sm")?,
        blocks_per_sm: u32_of("blocks_per_sm")?,
        threads_per_block: u32_of("threads_per_block")?,
        memory_bytes: u("memory_bytes")?,
        driver_version: i32::try_from(v.get("driver_version")?.as_i64()?).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_survive_the_round_trip_and_reject_other_files() {
        let info = DeviceInfo {
            ordinal: 0,
            name: "NVIDIA H100 80GB HBM3".into(),
            compute_capability: (9, 0),
            sms: 132,
            l2_bytes: 50 << 20,
            shared_per_block: 227 * 1024,
            shared_per_sm: 228 * 1024,
            threads_per_sm: 2048,
            blocks_per_sm: 32,
            threads_per_block: 1024,
            memory_bytes: 80 << 30,
            driver_version: 13000,
        };
        assert_eq!(from_json(&to_json(&info)), Some(info));
        assert_eq!(from_json(&json!({"name": "x"})), None);
        assert_eq!(from_json(&json!([1, 2])), None);
    }
}
