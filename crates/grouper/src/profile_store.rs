//! Device profiles on disk: JSON in the user's cache directory (`$GROUPER_CACHE_DIR`, else the
//! platform's cache directory under `grouper/`), one file per device, keyed by its name, its
//! driver (GPU) or thread count (CPU), and grouper's version — a new driver or release measures
//! anew rather than trusting old crossovers. `grouper calibrate` writes them; sessions read them.

use std::path::PathBuf;
use std::sync::Arc;

use grouper_core::profile::{KeyKind, Point, Profile};
#[cfg(feature = "gpu")]
use grouper_gpu::DeviceInfo;
use serde_json::{json, Value};

/// The folder profiles live in, if the platform has a cache directory.
pub fn cache_dir() -> Option<PathBuf> {
    match std::env::var_os("GROUPER_CACHE_DIR") {
        Some(d) if !d.is_empty() => Some(PathBuf::from(d)),
        _ => dirs::cache_dir().map(|d| d.join("grouper")),
    }
}

/// The key of a GPU's profile.
#[cfg(feature = "gpu")]
pub fn gpu_key(info: &DeviceInfo) -> String {
    format!(
        "{} driver {} grouper {}",
        info.name,
        info.driver_version,
        env!("CARGO_PKG_VERSION")
    )
}

/// The key of this CPU's profile with `threads` workers.
pub fn cpu_key(threads: usize) -> String {
    format!(
        "{} {threads} threads grouper {}",
        cpu_model(),
        env!("CARGO_PKG_VERSION")
    )
}

/// The CPU's model name (`/proc/cpuinfo`), or "unknown CPU".
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// Where the profile of `key` is stored.
pub fn path_for(key: &str) -> Option<PathBuf> {
    let slug: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    cache_dir().map(|d| d.join(format!("profile-{slug}.json")))
}

/// The stored profile of `key`; `None` when there is none. A file that cannot be read as a
/// profile is reported once on stderr and ignored (the rules decide).
pub fn load(key: &str) -> Option<Arc<Profile>> {
    let path = path_for(key)?;
    let text = std::fs::read_to_string(&path).ok()?;
    match serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| from_json(&v))
    {
        Some(p) if p.device == key => Some(Arc::new(p)),
        Some(_) => None,
        None => {
            eprintln!(
                "grouper: ignoring unreadable device profile {} (rerun grouper calibrate)",
                path.display()
            );
            None
        }
    }
}

/// Writes `profile` (with `extra` fields such as the command) under its key; returns the path.
pub fn save(profile: &Profile, extra: Value) -> anyhow::Result<PathBuf> {
    let path = path_for(&profile.device)
        .ok_or_else(|| anyhow::anyhow!("no cache directory: set GROUPER_CACHE_DIR"))?;
    let mut v = to_json(profile);
    if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
        o.extend(e);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(&v)?)?;
    Ok(path)
}

/// A profile as JSON.
pub fn to_json(p: &Profile) -> Value {
    json!({
        "device": p.device,
        "points": p.points.iter().map(|pt| json!({
            "keys": pt.kind.name(),
            "skewed": pt.skewed,
            "groups_log2": pt.groups_log2,
            "ms": pt.ms.iter().map(|(s, t)| (s.clone(), json!(t))).collect::<serde_json::Map<_, _>>(),
            "best": pt.best().map(|b| b.0),
            "shape": pt.shape.map(|(b, t, i)| json!({"blocks_per_sm": b, "threads": t, "items": i})),
        })).collect::<Vec<_>>(),
    })
}

/// A profile from JSON, or `None` if it is not one.
pub fn from_json(v: &Value) -> Option<Profile> {
    let points = v
        .get("points")?
        .as_array()?
        .iter()
        .map(|p| {
            let shape = p.get("shape").and_then(|s| {
                let f = |k: &str| s.get(k).and_then(Value::as_u64).map(|x| x as u32);
                Some((f("blocks_per_sm")?, f("threads")?, f("items")?))
            });
            Some(Point {
                kind: KeyKind::parse(p.get("keys")?.as_str()?)?,
                // Profiles from before skew was calibrated hold uniform points only.
                skewed: p.get("skewed").and_then(Value::as_bool).unwrap_or(false),
                groups_log2: p.get("groups_log2")?.as_u64()? as u32,
                ms: p
                    .get("ms")?
                    .as_object()?
                    .iter()
                    .filter_map(|(s, t)| Some((s.clone(), t.as_f64()?)))
                    .collect(),
                shape,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Profile {
        device: v.get("device")?.as_str()?.to_string(),
        points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_keys_by_device() {
        let p = Profile {
            device: "Some GPU driver 13000 grouper 0.1.0".into(),
            points: vec![Point {
                kind: KeyKind::Hashed,
                skewed: true,
                groups_log2: 21,
                ms: vec![("block_local".into(), 21.8), ("global".into(), 22.7)],
                shape: Some((4, 512, 2)),
            }],
        };
        assert_eq!(from_json(&to_json(&p)), Some(p.clone()));
        // A point stored without the skew flag is a uniform one.
        let mut old = to_json(&p);
        old["points"][0].as_object_mut().unwrap().remove("skewed");
        assert!(!from_json(&old).unwrap().points[0].skewed);
        assert!(from_json(&json!({"points": 3})).is_none());
        let a = path_for("NVIDIA H100 80GB HBM3 driver 13000 grouper 0.1.0").unwrap();
        let b = path_for("NVIDIA H100 80GB HBM3 driver 13010 grouper 0.1.0").unwrap();
        assert_ne!(a, b);
        assert!(a
            .to_string_lossy()
            .ends_with("profile-nvidia-h100-80gb-hbm3-driver-13000-grouper-0.1.0.json"));
    }
}
