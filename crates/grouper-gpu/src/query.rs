//! A query as the GPU runs it, and how to run it: the columns it reads, the filter, keys and
//! aggregate arguments as expression IR ([`GpuQuery`]), the options a caller sets
//! ([`GpuOptions`]), and what a source's statistics say of each column before any row is read
//! ([`ColumnBounds`]). [`GpuQuery::check`] is where user input is validated; everything below
//! it may assume a well-formed query.

use std::sync::Arc;

use arrow::datatypes::DataType;

use crate::codegen::MAX_COLUMNS;
use crate::strategy::{GpuParams, GpuStrategy, Placement, Probing};
use grouper_core::agg::layout::Layout;
use grouper_core::agg::AggregateSpec;
use grouper_core::error::{GrouperError, Result};
use grouper_core::expr::Expr;
use grouper_core::profile::Profile;
use grouper_core::table::{check_fill_factor, check_mapping};
use grouper_core::tune::Hyper;

/// A query as the GPU runs it: over the columns of the input batches.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuQuery {
    /// Types of the input columns.
    pub columns: Vec<DataType>,
    /// Rows pass when true.
    pub filter: Option<Expr>,
    /// Group key columns (input column indices), in output order.
    pub keys: Vec<usize>,
    /// Aggregates with their arguments (`None` for COUNT(*)).
    pub aggregates: Vec<(AggregateSpec, Option<Expr>)>,
}

impl GpuQuery {
    /// Checks that the GPU runs this query with `opts` (types, expressions, parameters) and
    /// returns its state layout; the error says what is not supported.
    pub fn check(&self, opts: &GpuOptions) -> Result<Layout> {
        let query = self;
        check_fill_factor(opts.params.fill_factor)?;
        check_mapping(opts.params.hash, opts.params.buckets)?;
        check_probing(opts)?;
        for &k in &query.keys {
            let t = query.columns.get(k).ok_or_else(|| {
                GrouperError::InvalidInput(format!("key column {k} out of range"))
            })?;
            if !grouper_core::keys::supports(t) {
                return Err(GrouperError::UnsupportedType {
                    what: "group key",
                    data_type: t.clone(),
                });
            }
        }
        let p = &opts.params;
        if let Some(t) = p.threads_per_block {
            if !t.is_multiple_of(32) || !(32..=1024).contains(&t) {
                return Err(GrouperError::InvalidOption(format!(
                    "threads per block must be a multiple of 32 in 32..=1024, got {t}"
                )));
            }
        }
        if !(1..=16).contains(&p.items_per_thread) {
            return Err(GrouperError::InvalidOption(format!(
                "items per thread must be in 1..=16, got {}",
                p.items_per_thread
            )));
        }
        if query.columns.len() + 2 * query.keys.len() > MAX_COLUMNS {
            return Err(GrouperError::Unsupported(format!(
                "more than {MAX_COLUMNS} input columns on the GPU"
            )));
        }
        let specs: Vec<AggregateSpec> = query.aggregates.iter().map(|(s, _)| s.clone()).collect();
        if specs.len() > 64 {
            return Err(GrouperError::Unsupported(
                "more than 64 aggregates on the GPU".into(),
            ));
        }
        let layout = Layout::new(&specs)?;
        for e in query
            .filter
            .iter()
            .chain(query.aggregates.iter().filter_map(|(_, a)| a.as_ref()))
        {
            e.check()?;
            e.check_columns(&query.columns)?;
        }
        if let Some(f) = &query.filter {
            if f.data_type() != DataType::Boolean {
                return Err(GrouperError::InvalidInput(
                    "the filter is not boolean".into(),
                ));
            }
        }
        for (s, a) in &query.aggregates {
            if a.as_ref().map(Expr::data_type) != s.input_type {
                return Err(GrouperError::InvalidInput(format!(
                    "argument of {} does not have type {:?}",
                    s.kind, s.input_type
                )));
            }
        }
        Ok(layout)
    }
}

/// Cuckoo hashing runs in `thread_private`'s per-thread tables only (`codegen/probing`): a
/// table all threads share would hold keys in flight between two slots, in neither, where
/// another thread looks for them (why Luan ran no shared cuckoo table). Linear probing and
/// chaining run everywhere.
fn check_probing(opts: &GpuOptions) -> Result<()> {
    let private = opts
        .strategy
        .is_some_and(|s| s.placement() == Placement::Private && !s.is_perfect());
    match opts.params.probing {
        Probing::Cuckoo2 | Probing::Cuckoo4 if !private => Err(GrouperError::InvalidOption(format!(
            "'{}' runs on the GPU in thread_private's per-thread tables only: add --strategy thread_private (or run it on the CPU: --backend cpu)",
            opts.params.probing
        ))),
        _ => Ok(()),
    }
}

/// How to run.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuOptions {
    /// A forced strategy, or the planner's choice.
    pub strategy: Option<GpuStrategy>,
    /// Kernel parameters.
    pub params: GpuParams,
    /// Upload the columns once ([`crate::Prepared::new`]) and time the query on device memory.
    /// The prepared-input cache keeps the last resident input on the device (within
    /// `cache_bytes`), so queries over the same in-memory arrays upload it once.
    pub resident: bool,
    /// Rows per copied batch (and per launch); lowered to fit `memory_limit`.
    pub batch_rows: usize,
    /// Send columns in their transfer encoding ([`crate::encode`]) rather than as they are.
    pub compress: bool,
    /// Let the kernel read chunks from mapped pinned host memory instead of copying them.
    pub zero_copy: bool,
    /// Stream Parquet files to the GPU as their pages, decoded there ([`crate::pages`]),
    /// rather than as the batches DataFusion's scan decodes.
    pub pages: bool,
    /// Most device memory one query may take, bytes (`None`: what the device has).
    pub memory_limit: Option<u64>,
    /// Bytes the prepared-input cache may own (encoded images, dictionary codes on the host; a
    /// resident input's device copy); 0 turns it off. Only inputs whose arrays outlive a query
    /// (an in-memory table) gain.
    pub cache_bytes: u64,
    /// Filter precomputation (Tomé §3.6): evaluate the filter on the CPU and send one
    /// selection bit per row instead of the columns only the filter reads.
    pub cpu_filter: bool,
    /// The runtime tuner's hyper-parameters (`None`, the default: run the planner's launch
    /// shape). It tunes only what the options leave open: not a fixed block size or blocks per
    /// multiprocessor. Off by default until shapes compile in the background: each shape the
    /// search reaches is an NVRTC compile on the query's path (0.1 s, seconds for block_local
    /// on a cold kernel cache).
    pub tune: Option<Hyper>,
    /// This device's profile from `grouper calibrate`: where it measured near the estimate,
    /// its fastest strategy (and tuned launch shape) is the plan; elsewhere the rules decide.
    pub profile: Option<Arc<Profile>>,
}

impl Default for GpuOptions {
    fn default() -> Self {
        Self {
            strategy: None,
            params: GpuParams::default(),
            resident: false,
            batch_rows: 1 << 22,
            compress: true,
            zero_copy: false,
            pages: true,
            memory_limit: None,
            cache_bytes: 16 << 30,
            cpu_filter: false,
            tune: None,
            profile: None,
        }
    }
}

impl GpuOptions {
    /// How chunks reach the kernel, as reports name it.
    pub fn transfer(&self) -> &'static str {
        match (self.resident, self.zero_copy, self.compress) {
            (true, _, true) => "resident compressed",
            (true, _, false) => "resident",
            (false, true, true) => "zero-copy compressed",
            (false, true, false) => "zero-copy",
            (false, false, true) => "streaming compressed",
            (false, false, false) => "streaming",
        }
    }
}

/// What a source's statistics say of one input column before any row is read.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnBounds {
    /// Smallest and largest ordinal of its values (see [`grouper_core::keys::ordinal_min_max`]), when
    /// the statistics give both.
    pub range: Option<(i128, i128)>,
    /// Whether it may hold NULLs (true unless the statistics count none).
    pub may_null: bool,
}

impl Default for ColumnBounds {
    /// Nothing known.
    fn default() -> Self {
        Self {
            range: None,
            may_null: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use grouper_core::hash::HashFn;
    use grouper_core::table::BucketMap;

    /// `SELECT k, count(*) ... GROUP BY k` over one u32 key column.
    fn count_by_key() -> GpuQuery {
        GpuQuery {
            columns: vec![DataType::UInt32],
            filter: None,
            keys: vec![0],
            aggregates: vec![(AggregateSpec::count_star(), None)],
        }
    }

    /// Default options but for the hash function and bucket mapping.
    fn with(hash: HashFn, buckets: BucketMap) -> GpuOptions {
        let mut o = GpuOptions::default();
        o.params.hash = hash;
        o.params.buckets = buckets;
        o
    }

    /// The check refuses what the kernels must never see, with the reason, and lets the rest
    /// through: the identity hash under modulo (every small key in one bucket) and cuckoo
    /// outside thread_private's tables.
    #[test]
    fn check_refuses_identity_under_modulo_and_cuckoo_outside_private_tables() {
        let q = count_by_key();
        let err = q
            .check(&with(HashFn::Identity, BucketMap::Modulo))
            .unwrap_err();
        assert!(err.to_string().contains("identity hash"), "{err}");
        q.check(&with(HashFn::Identity, BucketMap::HighBits))
            .unwrap();
        q.check(&with(HashFn::Fnv1a, BucketMap::Modulo)).unwrap();
        let mut cuckoo = GpuOptions::default();
        cuckoo.params.probing = Probing::Cuckoo2;
        assert!(q.check(&cuckoo).is_err());
        cuckoo.strategy = Some(GpuStrategy::THREAD_PRIVATE);
        q.check(&cuckoo).unwrap();
    }
}
