//! `grouper calibrate`: measure every strategy at group counts 2^1, 2^3, … for dense and hashed
//! keys, uniform and zipf(1.1), on this machine's GPU (if there is one) and CPU, and store the
//! device profile — the
//! fastest strategy per point, hence the crossover points, and with `--tune` the launch shape
//! the runtime tuner found for it — in the user's cache directory. Sessions plan from it
//! before the rules; the tuner starts from its shapes.
//!
//! The points sit at odd powers of two so that `bench regret` (even powers) scores the profile
//! away from where it was measured.

use anyhow::Result;
use clap::Args;
use grouper_core::profile::{KeyKind, Profile};
use grouper_gpu::GpuStrategy;
use serde_json::json;

use crate::bench::common::git_commit;
use crate::bench::regret::{SweepDevice, SweepSize, DISTS};
use crate::bench::strategy_sweep::{cpu_point, gpu_point, gpu_tuned_shape, PointSpec};
use grouper::profile_store;

#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// Which devices: cpu, gpu (default: the GPU if there is one, and the CPU).
    #[arg(long, value_enum, value_delimiter = ',', num_args = 1..)]
    devices: Vec<SweepDevice>,
    #[command(flatten)]
    size: SweepSize,
    /// GPU: also run the runtime tuner on each point's fastest strategy and store its shape
    /// (an NVRTC compile per shape it reaches: minutes on a cold kernel cache).
    #[arg(long)]
    tune: bool,
}

pub async fn calibrate(a: CalibrateArgs) -> Result<()> {
    let threads = a.size.threads();
    let devices = if a.devices.is_empty() {
        let mut d = Vec::new();
        match grouper::device_facts::open() {
            Ok(_) => d.push(SweepDevice::Gpu),
            Err(e) => println!("GPU not calibrated: {e}"),
        }
        d.push(SweepDevice::Cpu);
        d
    } else {
        a.devices.clone()
    };
    for device in devices {
        let key = device.profile_key(threads)?;
        let (rows_log2, max) = a.size.extent(device);
        println!("calibrating {key}: 2^{rows_log2} rows, groups 2^1..2^{max}");
        let mut profile = Profile {
            device: key,
            points: Vec::new(),
        };
        // The distributions `bench regret` scores: uniform, and zipf(1.1), whose hottest key
        // takes ~10% of the rows at every group count.
        let series = DISTS
            .into_iter()
            .flat_map(|d| [(d, KeyKind::Dense), (d, KeyKind::Hashed)]);
        for (dist, kind) in series {
            for g in (1..=max).step_by(2) {
                let p = PointSpec {
                    dist,
                    kind,
                    groups_log2: g,
                    rows: 1 << rows_log2,
                };
                let m = match device {
                    SweepDevice::Gpu => gpu_point(&p, a.size.reps, None)?,
                    SweepDevice::Cpu => cpu_point(&p, a.size.reps, threads, true).await?,
                };
                let mut point = m.profile_point(&p);
                let best = point.best().map(|(s, t)| (s.to_string(), t));
                if let (true, SweepDevice::Gpu, Some((s, _))) = (a.tune, device, &best) {
                    if let Ok(s) = s.parse::<GpuStrategy>() {
                        point.shape = gpu_tuned_shape(&p, s, 12)?;
                    }
                }
                println!(
                    "  {:<7} {:<6} 2^{:<3} best {:<17} {:>9.3} ms{}",
                    dist.name(),
                    kind.name(),
                    g,
                    best.as_ref().map_or("-", |b| b.0.as_str()),
                    best.as_ref().map_or(f64::NAN, |b| b.1),
                    point.shape.map_or(String::new(), |(b, t, i)| format!(
                        ", tuned shape {b} blocks/SM x {t} threads x {i} items"
                    ))
                );
                profile.points.push(point);
                // Saved after every point: a run cut short still leaves a usable profile.
                save(&profile, &a, rows_log2)?;
            }
        }
        println!("stored {}", save(&profile, &a, rows_log2)?.display());
    }
    Ok(())
}

fn save(profile: &Profile, a: &CalibrateArgs, rows_log2: u32) -> Result<std::path::PathBuf> {
    profile_store::save(
        profile,
        json!({
            "commit": git_commit(),
            "command": std::env::args().collect::<Vec<_>>().join(" "),
            "rows": 1u64 << rows_log2,
            "reps": a.size.reps,
        }),
    )
}
