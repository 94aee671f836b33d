//! Rosenfeld's Algorithm 1 evaluated as he evaluated it (§4.2): the tuner fed the runtimes of
//! the full evaluation rather than the times of live batches. A stored `bench tuner` run holds
//! both halves: each strategy's exhaustive table (one pass of the input per shape) and the
//! starts each live search began from. Here they are replayed batch by batch through the same
//! [`Tuner`] (a batch of shape `c` takes `table[c] / chunks`, exactly, so each measurement
//! window settles at once) with the live run's hyper-parameters and a given similarity, and
//! judged by the same four metrics ([`judge`]). What sets these runs apart from the live ones is
//! only the noise of timing launches inside a running query. No GPU: `bench seeds rosenfeld
//! --report-only` computes them from the JSON.
// Benchmark analysis, not a query path: its indexing is into serde_json values (a missing key
// reads as Null, never panics).
#![allow(clippy::indexing_slicing)]

use std::collections::HashMap;

use grouper_core::tune::{Config, Hyper, Space, Tuner};
use grouper_gpu::{GpuConfig, GpuStrategy, TuneReport};
use serde_json::Value;

use crate::bench::tuner::{exhaustive_table, judge};

/// Passes over the input a live search gets to converge (`bench tuner --max-passes`).
const MAX_PASSES: usize = 40;

/// Every tuned run of the stored `bench tuner` result `run` (each strategy's and each point's
/// `auto`) replayed on its exhaustive times with similarity `s`, and with the run's patience
/// or, `as_published`, none (Algorithm 1 as Rosenfeld published it): the judged runs' JSON, as
/// the live runs' (`quality`, `effort`, ...).
pub(crate) fn injected_runs(run: &Value, s: f64, as_published: bool) -> Vec<Value> {
    let (Some(space), Some(rows), Some(batch_rows)) = (
        space(&run["space"]),
        run["rows"].as_u64(),
        run["batch_rows"].as_u64(),
    ) else {
        return Vec::new();
    };
    let h = &run["hyper"];
    let hyper = Hyper {
        similarity: s,
        prune: h["p"].as_f64().unwrap_or(1.07),
        v_max: h["v_max"].as_f64().unwrap_or(0.019),
        b_max: h["b_max"].as_u64().map_or(10, |b| b as u32),
        patience: h["patience"]
            .as_u64()
            .filter(|&p| p > 0 && !as_published)
            .map_or(u32::MAX, |p| p as u32),
    };
    let chunks = rows.div_ceil(batch_rows.max(1)).max(1) as usize;
    let mut out = Vec::new();
    for p in run["points"].as_array().into_iter().flatten() {
        if p["partial"] == Value::Bool(true) {
            continue;
        }
        // Each strategy's table, and its own search replayed from the starts it recorded.
        let mut tables: Vec<(GpuStrategy, HashMap<GpuConfig, f64>)> = Vec::new();
        for (name, st) in p["strategies"].as_object().into_iter().flatten() {
            let Ok(strategy) = name.parse::<GpuStrategy>() else {
                continue;
            };
            let t = exhaustive_table(strategy, &st["exhaustive"]);
            out.extend(replay(
                &t,
                &starts(&st["tuner"]),
                &space,
                hyper,
                chunks,
                batch_rows,
            ));
            tables.push((strategy, t));
        }
        // auto: from every strategy of the planned table kind, over all of their shapes.
        let Ok(planned) = p["planned_strategy"]
            .as_str()
            .unwrap_or("")
            .parse::<GpuStrategy>()
        else {
            continue;
        };
        let family: HashMap<GpuConfig, f64> = tables
            .iter()
            .filter(|(s, _)| s.is_perfect() == planned.is_perfect())
            .flat_map(|(_, t)| t.iter().map(|(c, ms)| (*c, *ms)))
            .collect();
        if p["auto"].is_object() {
            let starts = starts(&p["auto"]);
            out.extend(replay(&family, &starts, &space, hyper, chunks, batch_rows));
        }
    }
    out
}

/// The search driven by `table`'s times from `starts`, judged against `table`; `None` without
/// starts or times.
fn replay(
    table: &HashMap<GpuConfig, f64>,
    starts: &[GpuConfig],
    space: &Space,
    hyper: Hyper,
    chunks: usize,
    batch_rows: u64,
) -> Option<Value> {
    if table.is_empty() || starts.is_empty() {
        return None;
    }
    let mut tuner = Tuner::new(space.clone(), starts, hyper);
    let mut batches = 0;
    while !tuner.converged() && batches < MAX_PASSES * chunks {
        let Some(c) = tuner.next_config() else {
            break;
        };
        match table.get(&c) {
            Some(pass_ms) => {
                batches += 1;
                tuner.record(c, batch_rows, pass_ms / chunks as f64);
            }
            // A shape the exhaustive search could not run: infinitely slow, as live.
            None => tuner.fail(c),
        }
    }
    let passes = batches.div_ceil(chunks).max(1);
    let report = TuneReport {
        starts: starts.to_vec(),
        steps: tuner.steps().to_vec(),
        best: tuner.best(),
        converged: tuner.converged(),
        paired: tuner.paired(),
        batches: ((passes * chunks) as u64, tuner.search_batches()),
        search_ms: tuner.search_ms(),
        decision_ms: tuner.decision_ms(),
        compile_ms: 0.0,
        space: space.len(),
    };
    Some(judge(&report, passes, chunks, table).json)
}

/// The space a run searched (`{"blocks_per_sm": [..], "threads": [..], "items": [..]}`).
fn space(v: &Value) -> Option<Space> {
    let axis = |k: &str| -> Option<Vec<u32>> {
        v[k].as_array()?
            .iter()
            .map(|x| x.as_u64().map(|x| x as u32))
            .collect()
    };
    Some(Space {
        blocks_per_sm: axis("blocks_per_sm")?,
        threads: axis("threads")?,
        items: axis("items")?,
    })
}

/// The starts a judged live run names (`"global 8x256x1"`).
fn starts(judged: &Value) -> Vec<GpuConfig> {
    judged["starts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| parse_config(s.as_str()?))
        .collect()
}

/// A configuration as `Config`'s `Display` writes it: `global 8x256x1`.
fn parse_config(s: &str) -> Option<GpuConfig> {
    let (strategy, shape) = s.split_once(' ')?;
    let mut n = shape.split('x').map(|x| x.parse::<u32>().ok());
    Some(Config {
        strategy: strategy.parse().ok()?,
        blocks_per_sm: n.next()??,
        threads: n.next()??,
        items: n.next()??,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A shape space where the time falls towards (8, 256, 1): noise-free, both similarities
    /// find the fastest from the start (it is downhill all the way), with the metrics of the
    /// live runs' judge; one with a plateau at the start tells the similarities apart.
    #[test]
    fn injected_runs_follow_the_exhaustive_times_to_the_fastest_shape() {
        let space = json!({ "blocks_per_sm": [1, 2, 4, 8, 16], "threads": [64, 128, 256, 512], "items": [1, 2] });
        let mut rows = Vec::new();
        for b in [1u32, 2, 4, 8, 16] {
            for t in [64u32, 128, 256, 512] {
                for i in [1u32, 2] {
                    let d = (b.ilog2() as f64 - 3.0).abs()
                        + (t.ilog2() as f64 - 8.0).abs()
                        + (i - 1) as f64;
                    rows.push(json!([b, t, i, 10.0 * (1.0 + 0.5 * d)]));
                }
            }
        }
        let starts = json!({ "starts": ["global 1x64x2"] });
        let run = json!({
            "rows": 1 << 20, "batch_rows": 1 << 15,
            "hyper": { "p": 1.07, "v_max": 0.019, "b_max": 10, "patience": 8 },
            "space": space,
            "points": [
                { "groups": 16, "keys": "scattered_u64", "planned_strategy": "global",
                  "strategies": { "global": { "exhaustive": rows, "tuner": starts } },
                  "auto": starts },
                { "groups": 32, "keys": "scattered_u64", "partial": true,
                  "strategies": { "global": { "exhaustive": rows, "tuner": starts } } },
            ],
        });
        for (s, as_published) in [(0.06, false), (0.0, false), (0.06, true)] {
            let runs = injected_runs(&run, s, as_published);
            assert_eq!(
                runs.len(),
                2,
                "the strategy's and auto's; a partial point is skipped"
            );
            for j in &runs {
                assert_eq!(j["found"], "global 8x256x1", "s = {s}: {j}");
                assert_eq!(j["quality"], 1.0);
                let effort = j["effort"].as_f64().unwrap();
                assert!(effort > 0.0 && effort < 1.0, "{j}");
            }
        }
        // A plateau around the start (1 and 2 blocks per SM, rising 1% a step), downhill beyond
        // it: strictly following the gradient stops at the start, plateaus lead off it (as
        // published).
        let mut rows = Vec::new();
        for b in [1u32, 2, 4, 8, 16] {
            for t in [64u32, 128, 256, 512] {
                for i in [1u32, 2] {
                    let steps = f64::from(b.ilog2() + (t / 64).ilog2() + i - 1);
                    let ms = match b {
                        1 | 2 => 10.0 * (1.0 + 0.01 * steps),
                        _ => 10.0 - f64::from(b.ilog2() - 1),
                    };
                    rows.push(json!([b, t, i, ms]));
                }
            }
        }
        let mut flat = run.clone();
        flat["points"] = json!([{ "groups": 16, "keys": "scattered_u64", "planned_strategy": "global",
            "strategies": { "global": { "exhaustive": rows, "tuner": { "starts": ["global 1x64x1"] } } } }]);
        let strict = &injected_runs(&flat, 0.0, true)[0];
        assert!(
            (strict["quality"].as_f64().unwrap() - 10.0 / 7.0).abs() < 1e-9,
            "{strict}"
        );
        let plateau = &injected_runs(&flat, 0.06, true)[0];
        assert_eq!(plateau["quality"], 1.0, "{plateau}");
        assert_eq!(
            parse_config("block_local 4x128x2").map(|c| (c.blocks_per_sm, c.threads, c.items)),
            Some((4, 128, 2))
        );
        assert!(parse_config("global 4x128").is_none());
    }
}
