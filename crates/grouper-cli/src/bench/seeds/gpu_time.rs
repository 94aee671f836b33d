//! Timing GPU configurations on one device-resident input, for the papers' GPU experiments:
//! the input uploaded once (every other configuration retargets it), each answer checked
//! (group count and totals) before timing, kernel time by CUDA events, each configuration's
//! median over rounds that start one further each time, every timed run after an untimed one
//! of its own (so it does not inherit the L2 and clocks another left: `gpu_sweep`'s method).
//! Each configuration's set-up (compiles, upload, the checked run) is printed with its seconds
//! as it ends, so a device call cut off by its time limit shows where the time went.

use std::time::Instant;

use anyhow::{Context, Result};
use arrow::record_batch::RecordBatch;
use grouper_core::GrouperError;
use grouper_gpu::{GpuOptions, GpuStrategy, Prepared};

use crate::bench::common::{median, turn};
use crate::bench::gpu_sweep::{check_groups, sweep_query, timed_run, Totals};

/// One configuration's median kernel milliseconds and the strategy its checked run took
/// (what `auto` chose: a report says why `auto` was slow or fast).
pub struct Timed {
    /// Median kernel milliseconds over the rounds.
    pub ms: f64,
    /// The strategy the checked run took.
    pub strategy: GpuStrategy,
}

/// The `ms` and `strategy` fields of a point: both null where the configuration did not apply.
pub fn fields(t: Option<&Timed>) -> (Option<f64>, Option<String>) {
    (t.map(|t| t.ms), t.map(|t| t.strategy.to_string()))
}

/// Each named configuration (all resident) timed on `batch`, the sweep's query over its key
/// and f32 value columns, which has `distinct` groups; `None` for a configuration that does
/// not apply there (a direct table past its room, say).
pub fn time_configs(
    batch: &RecordBatch,
    distinct: usize,
    configs: &[(String, GpuOptions)],
    reps: usize,
) -> Result<Vec<Option<Timed>>> {
    let totals = Totals::of(batch)?;
    let query = sweep_query(batch.schema().field(0).data_type().clone());
    // The input is uploaded once, for the first configuration that applies.
    let mut prepared: Vec<Option<(Prepared, GpuStrategy)>> = Vec::with_capacity(configs.len());
    for (name, opts) in configs {
        let started = Instant::now();
        let p = match prepared.iter().flatten().next() {
            Some((first, _)) => first.retarget(opts),
            None => Prepared::new(&query, std::slice::from_ref(batch), opts),
        };
        let mut p = match p {
            Ok(p) => p,
            Err(GrouperError::InvalidOption(why)) => {
                println!("{name}: does not apply ({why})");
                prepared.push(None);
                continue;
            }
            Err(e) => return Err(anyhow::Error::new(e).context(name.clone())),
        };
        let strategy = check_groups(&mut p, distinct, &totals).with_context(|| name.clone())?;
        let secs = started.elapsed().as_secs_f64();
        println!("{name}: set up in {secs:.1} s ({strategy})");
        prepared.push(Some((p, strategy)));
    }
    let mut runs = vec![Vec::with_capacity(reps); configs.len()];
    for rep in 0..reps.max(1) {
        for i in turn(configs.len(), rep) {
            if let (Some(Some((p, _))), Some(r)) = (prepared.get_mut(i), runs.get_mut(i)) {
                r.push(timed_run(p)?);
            }
        }
    }
    Ok(runs
        .into_iter()
        .zip(&prepared)
        .map(|(r, p)| {
            p.as_ref().map(|&(_, strategy)| Timed {
                ms: median(&r),
                strategy,
            })
        })
        .collect())
}
