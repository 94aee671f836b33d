//! Do no harm: where `auto` leaves an aggregation to DataFusion's own `AggregateExec`.
//!
//! grouper is a drop-in operator: installing it must never make a DataFusion user's query
//! slower. DataFusion's hash aggregation is therefore one of the planner's choices, taken at
//! plan time from facts that cost microseconds (key types, the scan's statistics, the GPU
//! decision of [`crate::backend::auto_gpu`]), and `--explain` says why ([`take_kept`]).
//!
//! Where grouper keeps an aggregation under `auto`:
//! - the GPU would run it (pages of a large Parquet scan, co-processing of a large table);
//! - every key a plain column of an ordinal type (integers, dates, decimals, booleans) whose
//!   domain, bounded by the statistics before any row is read (for an in-memory table, which
//!   has none, by a sample of its rows: [`crate::stats::sampled_range`]), fits a direct-index table
//!   ([`ALWAYS_PERFECT_DOMAIN`]), over at least [`MIN_ROWS`] rows, [`MIN_ROWS_PER_WORKER`] rows
//!   a worker and [`ROWS_PER_SLOT`] rows for each slot of the workers' tables: grouper's
//!   perfect strategy, 1.4–6.4× DataFusion in memory;
//! - string keys of at most [`FEW_STRINGS`] values each (listed by the Parquet files' dictionary
//!   pages, or found in a sample of an in-memory table), counted as such a domain, where an
//!   argument is decimal arithmetic for the fused pipeline: TPC-H Q1 (1.45x DataFusion from
//!   Parquet on 2 cores, 1.57x on 16); of at most [`DICTIONARY_STRINGS`] where an aggregate is
//!   a CORR (db-benchmark q9, 1.7–2x) or the keys are several (q2, 1.0–1.5x);
//! - string keys of at most [`DICTIONARY_STRINGS`] values each that the workers' scan of local
//!   Parquet files reads dictionary-encoded (the aggregation's input, or the fused source under
//!   a filter the CPU fuses; key columns no filter or argument reads), counted as such a domain;
//! - one string key of an in-memory table with about [`MANY_STRINGS`] values or more (their
//!   number estimated from the sample, [`many_strings`]), over [`ROWS_PER_SLOT`] rows for each
//!   slot of the workers' tables: coded once, its groups live in direct tables (db-benchmark q3
//!   and q7, 1.07-1.25x DataFusion on 2 and 4 threads of the H200 host; on 16 threads, 6 rows
//!   a slot, they stay DataFusion's);
//! - keys of an in-memory table (their values from a sample of its rows) over a domain wider
//!   than a direct-index table, over enough rows ([`MIN_ROWS`], [`MIN_ROWS_PER_WORKER`]): no
//!   scan for DataFusion's partial aggregates to ride on, and grouper's hash strategies beat its
//!   repartitioned hash aggregation of the same batches. `bench cpu-sweep` (SUM of a double and
//!   COUNT(*)), grouper's CPU over DataFusion alone at 2^22 and 2^24 groups, uniform and zipf
//!   1.1: 2 threads here, 2^25 rows 2.21, 1.45, 2.69, 1.16x (`cpu-sweep-local-2t-c0a3710.json`),
//!   2^24 rows (about a row a group) 1.68, 1.34, 1.75, 1.04x
//!   (`cpu-sweep-local-2t-wide-3a3fb78.json`); 16 threads on the H200 host, 2^25 rows 1.29,
//!   1.04, 1.06, 1.00x (`cpu-sweep-h200-16t-e1a7fb4.json`). The same domains from files'
//!   statistics stay DataFusion's (below);
//! - one key, an integer column that local Parquet files hold in order over their row groups,
//!   over a domain of any width, with as many rows: per-worker tables in key order, unhashed,
//!   and no merge ([`key_in_file_order`]; TPC-H Q18's subquery 1.7–2× DataFusion).
//!
//! Everything else stays DataFusion's. Measured (fresh process per query, files in the page
//! cache, `bench/results/files-*.json`): string keys (TPC-H Q10, Q16), a domain only the first
//! batch suggested (Q18's `l_orderkey`, sorted: 2,191 groups planned, 1.5M arrived), wide
//! pairs of ids (Q20) and keys after joins without statistics (Q2, Q11) ran 0.27–0.84× of
//! DataFusion alone under grouper's CPU strategies; the same queries are now DataFusion's.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use std::path::PathBuf;
use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::execution::cache::cache_manager::FileMetadataCache;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use grouper_core::agg::AggKind;
use grouper_core::expr::Expr;
use grouper_core::planner::ALWAYS_PERFECT_DOMAIN;

use crate::config::{Backend, Engine, KeptLog};
use crate::group_by::GroupByPlan;
use crate::parquet_files::{
    dictionary_values, local_parquet_files, row_groups_in_order, scan_columns, scan_files,
    string_type,
};
use crate::stats::{input_stats, sampled_distinct_strings, sampled_strings, InputStats};

/// Why `auto` left an aggregation to DataFusion, or `None` when grouper takes it.
pub(crate) fn datafusion_keeps(
    engine: &Engine,
    lower: &AggregateExec,
    plan: &GroupByPlan,
) -> Option<String> {
    if engine.backend != Backend::Auto || engine.grouper_only || forced(engine) {
        return None;
    }
    #[cfg(feature = "gpu")]
    match crate::backend::auto_gpu(engine, plan) {
        crate::backend::AutoGpu::No(_) => {}
        gpu => {
            gpu.start_early();
            return None;
        }
    }
    cpu_loses(lower.input(), plan, engine.pool.threads())
}

/// A strategy or table parameter the user fixed is grouper's to run.
fn forced(engine: &Engine) -> bool {
    #[cfg(feature = "gpu")]
    if engine.gpu.strategy.is_some() {
        return true;
    }
    let o = &engine.overrides;
    o.strategy.is_some() || o.hash.is_some() || o.fill_factor.is_some()
}

/// Input rows (from statistics) below which DataFusion keeps a grouped aggregation on the
/// CPU. TPC-H SF 1, 2 threads: Q2 (159k rows into 117k groups) and Q11 (32k rows) took 17
/// and 10 ms longer under grouper's perfect strategy than under DataFusion (tables sized to
/// the key domain, the workers' merge, one output partition).
pub const MIN_ROWS: u64 = 1 << 20;

/// Input rows per worker below which DataFusion keeps a grouped aggregation on the CPU: each
/// worker's set-up (its tables, its share of the merge, batches handed to it) is paid per query,
/// and from files DataFusion's partial aggregates run inside its own scan threads. Measured with
/// `grouper bench harm` (fresh process per query, Parquet in the page cache): on the H100 host
/// (16 workers) the 32 random cases grouper's CPU took, 1.1–4.3M rows (65k–270k a worker) into
/// domains of 3 to 9,018 groups, ran 1.08× DataFusion alone in geometric mean of the fastest
/// runs, whatever the domain; on 2 cores (0.5–2M rows a worker), 37 such cases ran 1.00×.
pub const MIN_ROWS_PER_WORKER: u64 = 1 << 19;

/// [`MIN_ROWS_PER_WORKER`] where the fused pipeline computes decimal arithmetic (in 64 bits,
/// where DataFusion's projection runs 128-bit kernels): that pays for the workers' set-up at
/// fewer rows each. TPC-H Q1 from tpchgen-cli Parquet on the H200 host's 16 workers, fresh
/// processes, medians of 7 in three calls (`bench/results/q1-small-h200-16t-harm.json`): at SF 1
/// (375k rows a worker) `auto` now 67-74 ms where it had left Q1 to DataFusion (99-121 ms), at
/// SF 0.5 (187k) 49-61 against 66-82; at SF 0.2 (75k) grouper's CPU ran level with DataFusion
/// (42.5-46.0 against 43.2-49.2 ms) and `auto` 0.94-0.98x, so that stays DataFusion's.
pub const MIN_ROWS_PER_WORKER_DECIMAL: u64 = 1 << 17;

/// Input rows per slot of the workers' direct tables (threads × domain) below which DataFusion
/// keeps the aggregation: each worker folds into a table the size of the key domain and the
/// tables are merged slot by slot. TPC-H Q15 at SF 10 on the H100 host (2.3M rows into a
/// 100k-value domain, 16 workers: 1.4 rows a slot) ran 0.80–0.92× DataFusion alone; Q17 at SF 1
/// on 2 cores (6M rows, 200k values: 15 rows a slot) 1.19×. db-benchmark q5 (three SUMs by
/// `id6`, 100,000 values in 1e7 rows, in memory) on the H200 host, grouper's CPU over DataFusion
/// alone (`groupby-h200-threads-minmax.json`): 2 threads (62 rows a slot) 1.55x, 4 threads 1.45x,
/// 8 threads (12 rows) 1.16x, 16 threads (6 rows) 0.73x; on the 2-core Xeon VM 1.16-2.10x.
pub const ROWS_PER_SLOT: u128 = 8;

/// Why grouper's CPU strategies would not beat DataFusion's hash aggregation over `input`, or
/// `None` where a direct-index table provably fits the keys.
fn cpu_loses(input: &Arc<dyn ExecutionPlan>, plan: &GroupByPlan, threads: usize) -> Option<String> {
    let decimal = fuses_decimal_arithmetic(plan);
    if plan.keys.is_empty() {
        // A global aggregate fused straight over Parquet files with decimal arithmetic:
        // grouper's fused pipeline computes it in 64 bits, where DataFusion's projection runs
        // 128-bit kernels (TPC-H Q6, `global-decimal-files.json`). Others, over joins (Q14,
        // Q19) or without such arithmetic, stay DataFusion's.
        let over_files = plan
            .fused
            .as_ref()
            .is_some_and(|f| local_parquet_files(&f.source).is_some());
        if decimal && over_files {
            let stats = input_stats(input, plan).unwrap_or_default();
            return few_rows(&stats, threads, true);
        }
        return Some(
            "no keys: DataFusion's per-partition partial aggregates are as fast as grouper's CPU"
                .into(),
        );
    }
    let stats = input_stats(input, plan).unwrap_or_default();
    let mut domain: u128 = 1;
    // Whether every key's values come from a sample of in-memory rows.
    let mut in_memory = true;
    // What the workers' scan would read as dictionaries, found once for all keys.
    let scanned = std::cell::OnceCell::new();
    for (i, ((_, name), t)) in plan.keys.iter().zip(&plan.spec.key_types).enumerate() {
        let key = stats.keys.get(i).cloned().unwrap_or_default();
        if !key.column {
            return Some(format!(
                "key `{name}` is an expression, whose range no statistics bound"
            ));
        }
        if !ordinal(t) {
            // A string key of a few values (the Parquet files' dictionary pages list them, or a
            // sample of an in-memory table finds them).
            let few = few_strings(plan, i, t, decimal).or_else(|| {
                let (files, names) = scanned.get_or_init(|| workers_key_names(input, plan));
                let name = names.get(i)?.as_ref()?;
                dictionary_values(files, name, DICTIONARY_STRINGS, DICTIONARY_CHUNKS)
                    .map(|v| (v, false))
            });
            match few {
                Some((values, from_sample)) => {
                    domain = domain.saturating_mul(values as u128 + u128::from(key.may_null));
                    in_memory &= from_sample;
                    continue;
                }
                None => {
                    return many_strings(plan, i, &stats, threads, decimal).unwrap_or_else(|| {
                        Some(format!(
                            "key `{name}` is {t}: DataFusion hashes such keys as fast as grouper's CPU"
                        ))
                    })
                }
            }
        }
        let Some((lo, hi)) = key.range else {
            return Some(format!(
                "no statistics bound key `{name}` (a first batch's range says little of the rest)"
            ));
        };
        in_memory &= key.sampled;
        let width = (hi - lo) as u128 + 1 + u128::from(key.may_null);
        domain = domain.saturating_mul(width);
    }
    if domain > u128::from(ALWAYS_PERFECT_DOMAIN) {
        if in_memory {
            // No per-worker direct tables to merge: the planner hashes (partitioned,
            // thread_local) or indexes a domain the sample fills densely (module notes).
            return few_rows(&stats, threads, decimal);
        }
        if plan.keys.len() == 1 && key_in_file_order(input, plan, None) {
            // Per-worker tables in key order, unhashed, and no merge (the planner's
            // `sorted` rule): no direct table, so only the rows matter.
            return few_rows(&stats, threads, decimal);
        }
        return Some(format!(
            "the keys' domain from statistics ({domain}) is wider than a direct-index table ({ALWAYS_PERFECT_DOMAIN}): DataFusion's hash table is as fast as grouper's CPU there"
        ));
    }
    if let Some(why) = few_rows(&stats, threads, decimal) {
        return Some(why);
    }
    let rows = stats.rows.unwrap_or_default();
    let slots = domain.saturating_mul(threads as u128);
    if u128::from(rows) < ROWS_PER_SLOT * slots {
        return Some(format!(
            "about {rows} input rows for {threads} workers' direct tables of {domain} groups each: merging them costs more than DataFusion's partitioned aggregation saves"
        ));
    }
    None
}

/// Estimated values of one string key of an in-memory table from which `auto` runs it on
/// grouper's CPU ([`many_strings`]). Coded once into dense codes, such a key's groups live in
/// direct tables whose states grouper's CPU reads at random with no hash entry to pass, which
/// pays once the tables leave the caches; over fewer values both engines' tables stay in
/// cache and DataFusion's hashing of the strings was as fast or faster: db-benchmark q1 (`id1`,
/// 100 values) ran 0.65-0.85x DataFusion alone under grouper's CPU on 2 threads of the 2-core
/// Xeon VM (`groupby-local-xeon-2t-1e7-*.json`), 0.96-1.04x on 2 to 16 threads of the H200 host
/// (`groupby-h200-threads-minmax.json`).
pub const MANY_STRINGS: u64 = 1 << 14;

/// For the one string key (key `i`) of an in-memory table with about [`MANY_STRINGS`] values
/// or more (a sample's estimate, [`sampled_distinct_strings`]): `Some(None)` where grouper's
/// CPU keeps the aggregation (enough rows, and [`ROWS_PER_SLOT`] rows for each slot of the
/// workers' tables of that many groups), `Some(Some(why))` where DataFusion does; `None` for
/// any other key (fewer values, several keys, no in-memory table, a clustered column).
/// db-benchmark q3 and q7 (`id3`, 100,000 values in 1e7 rows; 1e6 in 1e8) on the H200 host,
/// grouper's CPU over DataFusion alone (`groupby-h200-threads-minmax.json`): 2 threads 1.22x
/// and 1.25x, 4 threads 1.17x and 1.07-1.11x, 8 threads 1.04x and 0.95-0.97x, 16 threads 0.77x
/// and 0.67-0.70x; the bound gives 2 to 12 workers to grouper there. On the 2-core Xeon VM
/// 1.37-2.12x (1e7 and 1e8 rows) in a spell its last-level cache barely served, 0.97-1.06x
/// (q3) and 0.81-0.88x (q7, before the select-based MIN/MAX fold) in spells it did.
fn many_strings(
    plan: &GroupByPlan,
    i: usize,
    stats: &InputStats,
    threads: usize,
    decimal: bool,
) -> Option<Option<String>> {
    if plan.keys.len() != 1 {
        return None;
    }
    let fused = plan.fused.as_ref()?;
    let values = sampled_distinct_strings(&fused.source, *fused.keys.get(i)?)?;
    if values < MANY_STRINGS {
        return None;
    }
    if let Some(why) = few_rows(stats, threads, decimal) {
        return Some(Some(why));
    }
    // No more values than rows (the estimate overshoots where each value has few rows).
    let rows = stats.rows.unwrap_or_default();
    let values = values.min(rows);
    let slots = u128::from(values).saturating_mul(threads as u128);
    Some((u128::from(rows) < ROWS_PER_SLOT * slots).then(|| {
        format!(
            "about {rows} input rows for {threads} workers' tables of the key's ~{values} strings (a sample's estimate): merging them costs more than DataFusion's partitioned aggregation saves"
        )
    }))
}

/// Why the input's rows are too few for grouper's CPU (by [`MIN_ROWS`], and
/// [`MIN_ROWS_PER_WORKER`] or, where the fused pipeline computes decimal arithmetic
/// (`decimal`), [`MIN_ROWS_PER_WORKER_DECIMAL`]), or `None`.
fn few_rows(stats: &InputStats, threads: usize, decimal: bool) -> Option<String> {
    let Some(rows) = stats.rows else {
        return Some("no statistics give the input's rows".into());
    };
    if rows < MIN_ROWS {
        return Some(format!(
            "about {rows} input rows, too few for grouper's set-up (tables, workers, merge) to pay back"
        ));
    }
    let each = match decimal {
        true => MIN_ROWS_PER_WORKER_DECIMAL,
        false => MIN_ROWS_PER_WORKER,
    };
    if rows < each.saturating_mul(threads as u64) {
        return Some(format!(
            "about {rows} input rows for {threads} workers, under {each} each: grouper's per-worker set-up and merge cost more than DataFusion's partial aggregates in its scan threads save"
        ));
    }
    None
}

/// Whether the one key is a signed integer (or date, timestamp) column of local Parquet files
/// that hold it in increasing order over their row groups, read straight by the scan (through
/// filters only: a repartition interleaves the files' runs). Each worker then gets runs of
/// keys in order: TPC-H Q18's subquery (`l_orderkey`, a 6M-value domain at SF 1) ran 0.09 s
/// under grouper against DataFusion's 0.18 on 2 threads, and 0.25 against 0.42 at SF 10 on 16
/// (`bench/results/q18-sorted-h100.json`), where over a domain that wide the rule above left
/// it to DataFusion. Reads the files' footers: parsed at planning (`cache` is `None`: the
/// rule has no session), from DataFusion's metadata cache where the CPU workers would split
/// such a scan into morsels (`backend::cpu::morsels`).
pub(crate) fn key_in_file_order(
    input: &Arc<dyn ExecutionPlan>,
    plan: &GroupByPlan,
    cache: Option<&FileMetadataCache>,
) -> bool {
    let signed = |t: &DataType| {
        matches!(
            t,
            DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::Date32
                | DataType::Date64
                | DataType::Timestamp(..)
        )
    };
    let (Some((key, _)), Some(t)) = (plan.keys.first(), plan.spec.key_types.first()) else {
        return false;
    };
    let Some(col) = key.downcast_ref::<Column>() else {
        return false;
    };
    let mut scan = input;
    while let Some(f) = scan.downcast_ref::<FilterExec>() {
        if f.projection().is_some() {
            return false;
        }
        scan = f.input();
    }
    let Some((cfg, _, _)) = local_parquet_files(scan) else {
        return false;
    };
    signed(t)
        && scan_columns(cfg, scan)
            .and_then(|columns| columns.into_iter().nth(col.index()))
            .is_some_and(|name| row_groups_in_order(&scan_files(cfg), &name, cache))
}

/// String values of one key up to which `auto` runs a string-keyed aggregation with decimal
/// arithmetic in its arguments on grouper's CPU. Fresh processes over Parquet files in the page
/// cache, 2 threads (this 2-core AMD EPYC VM, 20M rows, medians of 5 interleaved runs,
/// `bench/results/string-keys-local.json`): TPC-H Q1 (flags of 3 and 2 values, decimal
/// arithmetic) 1.45x DataFusion alone (in memory 2.2x, `demo-local-2t-auto.json`); SUM, COUNT
/// and AVG by 3 strings 0.94-1.07x, with a filter and integer and float arithmetic 1.07x; by 8
/// strings 0.96x and 0.91-0.94x.
pub const FEW_STRINGS: usize = 4;

/// Column chunks whose dictionary pages [`few_strings`] (and the GPU page route's check of string
/// keys, `backend::pages::unlisted_string_key`) reads at the most (one small read each; Q1's two keys over SF 1's 53 row groups added no measurable planning time, `--timing`
/// plan 5-8 ms as under `--backend cpu`). TPC-H lineitem at SF 100 from tpchgen-cli would have
/// ~5,300 row groups; a scan of more chunks stays DataFusion's rather than pause planning.
pub const DICTIONARY_CHUNKS: usize = 1 << 14;

/// The number of distinct values of key `i`, a string column read straight from the fused
/// source, when there are at most [`FEW_STRINGS`] and an aggregate argument is decimal
/// arithmetic the fused pipeline computes (`decimal_arithmetic`, [`fuses_decimal_arithmetic`]
/// of the plan): listed by local Parquet files' dictionary pages (all
/// of them), or found in a sample of an in-memory table's rows (likely; the second value is
/// true then).
fn few_strings(
    plan: &GroupByPlan,
    i: usize,
    t: &DataType,
    decimal_arithmetic: bool,
) -> Option<(usize, bool)> {
    if !string_type(t) {
        return None;
    }
    let fused = plan.fused.as_ref()?;
    // Without decimal arithmetic to fuse, string keys of 3 values ran 0.77-0.93x DataFusion
    // alone on the H100 host's 16 threads (`bench/results/string-keys-h100-16t.json`): the
    // win is the 64-bit decimal pipeline, which DataFusion runs in 128 bits. A CORR wins by
    // itself: DataFusion's accumulator keeps six state arrays and calls a closure per row,
    // grouper's six sums are one struct per group (db-benchmark q9, id2 and id4, 1e7 rows in
    // memory: 1.98x DataFusion alone on the H200 host's 16 threads, 1.69-2.0x on 2 here;
    // `groupby-corr-*.json`).
    let corr = plan.spec.aggregates.iter().any(|a| a.kind == AggKind::Corr);
    // Several keys: DataFusion groups them row by row through its multi-column group values,
    // not the specialised map of one string column, and grouper packs their codes into one
    // word (db-benchmark q2, `id1` and `id2` of 100 strings each, SUM: grouper's CPU 1.21x
    // and 1.54x DataFusion alone on the H200 host's 16 threads, 1.01-1.22x on 2 here, in
    // memory; `groupby-*-composite-*.json`).
    let composite = plan.keys.len() > 1;
    // Coding a key of more strings costs more a row; CORR's gain and a composite key's pay
    // for up to a dictionary page's worth (q9's `id2` has 100).
    let few = match (decimal_arithmetic, corr || composite) {
        (_, true) => DICTIONARY_STRINGS,
        (true, false) => FEW_STRINGS,
        (false, false) => return None,
    };
    let column = *fused.keys.get(i)?;
    if let Some(values) = sampled_strings(&fused.source, column, few) {
        return Some((values, true));
    }
    let (cfg, _, files) = local_parquet_files(&fused.source)?;
    let name = scan_columns(cfg, &fused.source)?.into_iter().nth(column)?;
    dictionary_values(&files, &name, few, DICTIONARY_CHUNKS).map(|values| (values, false))
}

/// Whether an aggregate argument is decimal arithmetic the fused pipeline computes: in 64-bit
/// lanes, where DataFusion's projection runs 128-bit kernels row batch by row batch.
fn fuses_decimal_arithmetic(plan: &GroupByPlan) -> bool {
    plan.fused.as_ref().is_some_and(|f| {
        f.args.iter().flatten().any(|e| {
            matches!(
                e,
                Expr::Binary {
                    data_type: DataType::Decimal128(..),
                    ..
                }
            )
        })
    })
}

/// String values of one key up to which `auto` runs an aggregation straight over a scan of
/// local Parquet files on grouper's CPU, where that scan reads the key dictionary-encoded (a
/// column no filter or argument reads; [`crate::backend`]'s rebuilt scan): the key codec then codes
/// each batch's dictionary once. Fresh processes, files in the page cache, against DataFusion
/// alone (medians of 5; `bench/results/dictionary-keys-h200-16t.json`): on the H200 host's 16
/// threads SUM, COUNT and AVG by 3, 8 and 100 strings (20M rows) 1.13x, 1.13x and 1.11x, and
/// db-benchmark's q1 (`id1`, 100 values) 1.02x and q2 (`id1`, `id2`) 1.25x; on this 2-core VM
/// q1 1.21x and q2 1.53x; under an integer or date filter the CPU fuses (the fused source
/// read so) 1.09-1.92x on the H200 host (db-benchmark and TPC-H lineitem shapes, 1.0x with a
/// MAX of doubles; `dictionary-keys-fused-h200-16t.json`). At 10,000 values (a dictionary page
/// too large to read it so) or under a filter the CPU does not fuse it stays DataFusion's.
pub const DICTIONARY_STRINGS: usize = 128;

/// The local Parquet files grouper's CPU workers would read for `plan` over `input` (`input`,
/// or the fused source below it) and, for each key, the name of the column it is there when no
/// filter or argument reads that column: a key the scan reads as a dictionary when the files'
/// dictionary pages list at most [`DICTIONARY_STRINGS`] values. No files and no names where the
/// workers read no such scan.
fn workers_key_names(
    input: &Arc<dyn ExecutionPlan>,
    plan: &GroupByPlan,
) -> (Vec<PathBuf>, Vec<Option<String>>) {
    let (scan, keys) = crate::backend::fused_scan::workers_key_columns(plan, input);
    let Some((cfg, _, files)) = local_parquet_files(&scan) else {
        return (vec![], vec![]);
    };
    let columns = scan_columns(cfg, &scan).unwrap_or_default();
    let names = keys.iter().map(|c| columns.get((*c)?).cloned()).collect();
    (files, names)
}

/// Whether keys of type `t` code as integers from their range (no dictionary, no float bits).
fn ordinal(t: &DataType) -> bool {
    t == &DataType::Boolean
        || (grouper_core::keys::supports(t)
            && !t.is_floating()
            && !grouper_core::keys::coded_without_bounds(t))
}

/// The aggregations `auto` left to DataFusion in `ctx` since the last call, each as
/// `gby=[keys]: why` (for `--explain`).
pub fn take_kept(ctx: &SessionContext) -> Vec<String> {
    ctx.state()
        .config()
        .get_extension::<KeptLog>()
        .map(|l| l.take())
        .unwrap_or_default()
}
