//! Timing GPU configurations on one device-resident input, for the papers' GPU experiments:
//! the input uploaded once (every other configuration retargets it), each answer checked
//! (group count and totals) before timing, kernel time by CUDA events, each configuration's
//! median over rounds that start one further each time, every timed run after an untimed one
//! of its own (so it does not inherit the L2 and clocks another left: `gpu_sweep`'s method).

use anyhow::{Context, Result};
use arrow::record_batch::RecordBatch;
use grouper_gpu::{GpuOptions, Prepared};

use crate::bench::common::median;
use crate::bench::gpu_sweep::{check_groups, sweep_query, timed_run, turn, Totals};

/// Median kernel milliseconds of each named configuration (all resident) on `batch`, the
/// sweep's query over its key and f32 value columns, which has `distinct` groups.
pub fn time_configs(
    batch: &RecordBatch,
    distinct: usize,
    configs: &[(String, GpuOptions)],
    reps: usize,
) -> Result<Vec<f64>> {
    let totals = Totals::of(batch)?;
    let query = sweep_query(batch.schema().field(0).data_type().clone());
    let mut prepared: Vec<Prepared> = Vec::with_capacity(configs.len());
    for (name, opts) in configs {
        let p = match prepared.first() {
            Some(first) => first.retarget(opts),
            None => Prepared::new(&query, std::slice::from_ref(batch), opts),
        };
        let mut p = p.with_context(|| name.clone())?;
        check_groups(&mut p, distinct, &totals).with_context(|| name.clone())?;
        prepared.push(p);
    }
    let mut runs = vec![Vec::with_capacity(reps); configs.len()];
    for rep in 0..reps.max(1) {
        for i in turn(configs.len(), rep) {
            runs[i].push(timed_run(&mut prepared[i])?);
        }
    }
    Ok(runs.iter().map(|r| median(r)).collect())
}
