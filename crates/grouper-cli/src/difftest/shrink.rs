//! Shrinking a failing case: drop query parts, then rows (halving chunks, as in delta
//! debugging), then unused columns and partitions, keeping each step only while the same
//! target still mismatches DuckDB. The result is small enough to read in a regression file.

use anyhow::Result;

use super::case::Case;
use super::duckdb::Oracle;
use super::{run_one, Runner, Target, Verdict};

/// A smaller case on which `target` still mismatches, after at most `budget` trials; with
/// `baseline` (DataFusion's own aggregation), a difference that it shares does not count.
pub fn shrink(
    case: &Case,
    target: &Target,
    baseline: Option<&Target>,
    runner: &Runner,
    oracle: &mut Oracle,
    budget: usize,
) -> Result<Case> {
    let mut t = Trials {
        target,
        baseline,
        runner,
        oracle,
        left: budget,
    };
    let mut best = case.clone();
    // 1. The query: each simplification alone, repeated until none applies.
    loop {
        let mut progressed = false;
        for cand in query_candidates(&best) {
            if t.left == 0 {
                return Ok(best);
            }
            if t.fails(&cand)? {
                best = cand;
                progressed = true;
                break;
            }
        }
        if !progressed {
            break;
        }
    }
    // 2. Rows: remove chunks, halving their size.
    let mut chunk = best.table.rows().div_ceil(2);
    while chunk >= 1 && t.left > 0 {
        let mut start = 0;
        while start < best.table.rows() && t.left > 0 {
            let cand = without_rows(&best, start, chunk);
            if t.fails(&cand)? {
                best = cand;
            } else {
                start += chunk;
            }
        }
        if chunk == 1 {
            break;
        }
        chunk = chunk.div_ceil(2);
    }
    // 3. Columns the query does not mention, and partitions.
    let sql = best.query.sql();
    let mut cand = best.clone();
    cand.table.columns.retain(|c| sql.contains(&c.name));
    if !cand.table.columns.is_empty() && cand != best && t.left > 0 && t.fails(&cand)? {
        best = cand;
    }
    if best.table.partitions > 1 && t.left > 0 {
        let mut cand = best.clone();
        cand.table.partitions = 1;
        if t.fails(&cand)? {
            best = cand;
        }
    }
    Ok(best)
}

/// Trials left, and what a trial runs on.
struct Trials<'a> {
    target: &'a Target,
    baseline: Option<&'a Target>,
    runner: &'a Runner,
    oracle: &'a mut Oracle,
    left: usize,
}

impl Trials<'_> {
    /// Whether `c` still mismatches (one trial spent).
    fn fails(&mut self, c: &Case) -> Result<bool> {
        self.left = self.left.saturating_sub(1);
        let (_, v) = run_one(c, self.target, self.baseline, self.runner, self.oracle)?;
        Ok(matches!(v, Verdict::Mismatch(_)))
    }
}

fn without_rows(case: &Case, start: usize, len: usize) -> Case {
    let mut c = case.clone();
    for col in &mut c.table.columns {
        let end = (start + len).min(col.values.len());
        col.values.drain(start..end);
    }
    c
}

/// The case with each simpler variant of its query ([`Query::simpler`]).
fn query_candidates(case: &Case) -> Vec<Case> {
    case.query
        .simpler()
        .into_iter()
        .map(|query| Case {
            query,
            ..case.clone()
        })
        .collect()
}
