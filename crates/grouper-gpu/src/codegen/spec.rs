//! [`KernelSpec`]: everything a generated kernel's source depends on.

use arrow::datatypes::DataType;

use crate::encode::Encoding;
use crate::strategy::{BucketMap, GpuStrategy, Probing};
use grouper_core::agg::layout::Layout;
use grouper_core::expr::Expr;
use grouper_core::hash::HashFn;
use grouper_core::keys::PackedColumn;

/// Everything a kernel's source depends on.
#[derive(Debug, Clone)]
pub struct KernelSpec {
    /// Storage type of each device column (`UInt32` codes for dictionary keys), `None` if unread.
    pub columns: Vec<Option<DataType>>,
    /// Per column, how its values travel (`None`, or a missing entry: plain).
    pub encodings: Vec<Option<Encoding>>,
    /// Per column, whether any row of the input is NULL. Columns without NULLs are read with no
    /// validity-bitmap load or test (a load and several integer operations less per row).
    pub nullable: Vec<bool>,
    /// Rows pass when this is true.
    pub filter: Option<Expr>,
    /// Per key word, the columns packed into it.
    pub key_words: Vec<Vec<(usize, PackedColumn)>>,
    /// Per aggregate, its argument (`None` for COUNT(*)).
    pub args: Vec<Option<Expr>>,
    /// Per aggregate, whether its argument is never NULL in this input: its counting fields
    /// (COUNT(x), AVG's count, the seen flag) then equal the row count and are not updated
    /// (one memory operation less per row each); [`derive_counts`] fills them in afterwards.
    pub non_null_args: Vec<bool>,
    /// State words.
    pub layout: Layout,
    /// Index and placement.
    pub strategy: GpuStrategy,
    /// Probing scheme of hash tables.
    pub probing: Probing,
    /// Bucket mapping of the global hash table.
    pub buckets: BucketMap,
    /// Threads per block.
    pub threads: u32,
    /// Rows per thread per loop step.
    pub items_per_thread: u32,
    /// Hash function of hash tables.
    pub hash: HashFn,
    /// Perfect strategies: number of direct-index slots.
    pub domain: u64,
    /// perfect_shared and block_local: copies of the table per block (a power of two ≤
    /// threads); the partitioned strategies: the key ranges a partition's fold splits into
    /// (`placement::partitioned::size`).
    pub copies: u32,
    /// block_local: shared slots (power of two); thread_private: private slots per thread.
    pub local_slots: u64,
    /// Fill factor of shared/private tables before rows go to the global table.
    pub fill_factor: f64,
}

impl KernelSpec {
    /// Number of key words.
    pub fn key_count(&self) -> usize {
        self.key_words.len().max(1)
    }
}
