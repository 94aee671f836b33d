//! Spilling: when an aggregation's groups outgrow its memory budget, they leave memory as
//! partial groups (keys and un-finalized states, [`PartialGroups`]) in Arrow IPC files,
//! radix-partitioned by a hash of their keys, and come back one partition at a time to be
//! merged and finalized — the external aggregation of DuckDB and DataFusion, over the one
//! aggregate algebra (a state is saved exactly, so a spilled group merges to the same result).
//!
//! ```text
//!  a worker's groups ──evict──▶ PartialGroups ──hash of each key's arrow-row bytes──▶ 2^8 partitions
//!        ──▶ one run = one IPC file: one batch per partition that has groups, indexed in memory
//!  at the end, partition by partition: its batch of every run ──merge_all──▶ finalize ──▶ output
//! ```
//!
//! Memory at the end is one partition's groups (about 1/256 of all groups), so spilling
//! handles up to a few hundred times the budget in groups.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::{Field, Schema};
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use arrow::row::{RowConverter, SortField};

use crate::error::{GrouperError, Result};
use crate::hash::hash_bytes;
use crate::input::QuerySpec;
use crate::partial::PartialGroups;

/// Bits of a key's hash that pick its partition.
pub const PARTITION_BITS: u32 = 8;
/// Partitions of every spilled run.
pub const PARTITIONS: usize = 1 << PARTITION_BITS;

/// One spilled run: an IPC file holding some partial groups, a batch per non-empty partition.
#[derive(Debug)]
pub struct Run {
    path: PathBuf,
    /// Partition → the batch of the file that holds its groups.
    batches: Vec<Option<usize>>,
    /// Groups per partition.
    groups: Vec<u64>,
    bytes: u64,
}

impl Run {
    /// Writes `groups` into `out`, a new file that reads back from `path` once written;
    /// `None` when there are no groups (nothing is written).
    pub fn write<W: Write>(groups: &PartialGroups, out: W, path: &Path) -> Result<Option<Self>> {
        if groups.len == 0 {
            return Ok(None);
        }
        let parts = partition_rows(groups)?;
        let mut writer = None;
        let mut out = Some(out);
        let mut batches = vec![None; PARTITIONS];
        let mut counts = vec![0u64; PARTITIONS];
        let mut written = 0;
        for (p, rows) in parts.iter().enumerate() {
            if rows.is_empty() {
                continue;
            }
            let batch = to_batch(groups, rows)?;
            let w = match (&mut writer, out.take()) {
                (Some(w), _) => w,
                (None, Some(o)) => {
                    writer.insert(FileWriter::try_new(BufWriter::new(o), batch.schema_ref())?)
                }
                (None, None) => {
                    return Err(GrouperError::InvalidInput(
                        "a spill writer went missing".into(),
                    ))
                }
            };
            w.write(&batch)?;
            batches[p] = Some(written);
            counts[p] = rows.len() as u64;
            written += 1;
        }
        if let Some(mut w) = writer {
            w.finish()?;
            w.into_inner()?.flush()?;
        }
        Ok(Some(Self {
            path: path.to_path_buf(),
            batches,
            groups: counts,
            bytes: std::fs::metadata(path)?.len(),
        }))
    }

    /// The groups of partition `p` in this run, if it has any.
    pub fn read(&self, spec: &QuerySpec, p: usize) -> Result<Option<PartialGroups>> {
        let Some(i) = self.batches.get(p).copied().flatten() else {
            return Ok(None);
        };
        let mut reader = FileReader::try_new(BufReader::new(File::open(&self.path)?), None)?;
        reader.set_index(i)?;
        let batch = reader.next().transpose()?.ok_or_else(|| {
            GrouperError::InvalidInput(format!(
                "spill file {} lacks batch {i}",
                self.path.display()
            ))
        })?;
        from_batch(spec, &batch).map(Some)
    }

    /// Bytes of the file.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Groups of partition `p` in this run.
    pub fn groups(&self, p: usize) -> u64 {
        self.groups.get(p).copied().unwrap_or(0)
    }
}

/// The rows of `groups` in each partition: the top [`PARTITION_BITS`] of the hash of each key's
/// `arrow-row` bytes (the same in every run, whatever codec the groups were keyed under); a
/// global aggregate's one group goes to partition 0.
pub fn partition_rows(groups: &PartialGroups) -> Result<Vec<Vec<u32>>> {
    let mut parts = vec![Vec::new(); PARTITIONS];
    if groups.keys.is_empty() {
        parts[0] = (0..groups.len as u32).collect();
        return Ok(parts);
    }
    let fields = groups
        .keys
        .iter()
        .map(|k| SortField::new(k.data_type().clone()))
        .collect();
    let rows = RowConverter::new(fields)?.convert_columns(&groups.keys)?;
    for (i, row) in rows.iter().enumerate() {
        let p = (hash_bytes(row.data()) >> (64 - PARTITION_BITS)) as usize;
        parts[p].push(i as u32);
    }
    Ok(parts)
}

/// Groups `rows` of `groups` as one batch: key columns `k0..`, then each aggregate's state
/// columns `a{i}_{j}` ([`crate::agg::columns`]).
fn to_batch(groups: &PartialGroups, rows: &[u32]) -> Result<RecordBatch> {
    let picks = UInt32Array::from(rows.to_vec());
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (i, k) in groups.keys.iter().enumerate() {
        fields.push(Field::new(format!("k{i}"), k.data_type().clone(), true));
        columns.push(take(k.as_ref(), &picks, None)?);
    }
    for (i, acc) in groups.accs.iter().enumerate() {
        for (j, c) in acc.save(rows).into_iter().enumerate() {
            fields.push(Field::new(format!("a{i}_{j}"), c.data_type().clone(), true));
            columns.push(c);
        }
    }
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

/// The partial groups of a batch [`to_batch`] wrote, for a query of `spec`.
fn from_batch(spec: &QuerySpec, batch: &RecordBatch) -> Result<PartialGroups> {
    PartialGroups::from_columns(spec, batch.columns(), batch.num_rows())
}

#[cfg(test)]
mod tests {
    use arrow::array::{Float64Array, Int64Array, StringArray};
    use arrow::datatypes::DataType;
    use proptest::prelude::*;

    use super::*;
    use crate::agg::{AggKind, AggregateSpec};
    use crate::compare::same_groups;
    use crate::{reference, Aggregation, InputBatch};

    fn spec() -> QuerySpec {
        QuerySpec {
            key_types: vec![DataType::Int64, DataType::Utf8],
            aggregates: vec![
                AggregateSpec::count_star(),
                AggregateSpec::new(AggKind::Sum, DataType::Int64),
                AggregateSpec::new(AggKind::Sum, DataType::Decimal128(20, 2)),
                AggregateSpec::new(AggKind::Avg, DataType::Float64),
                AggregateSpec::new(AggKind::Avg, DataType::Decimal128(12, 2)),
                AggregateSpec::new(AggKind::Min, DataType::Utf8),
                AggregateSpec::new(AggKind::Max, DataType::Boolean),
                AggregateSpec::new(AggKind::Max, DataType::Float64),
                AggregateSpec::new(AggKind::Count, DataType::Int64),
                AggregateSpec::new(AggKind::Corr, crate::agg::pair_type()),
            ],
        }
    }

    fn batch(spec: &QuerySpec, rows: &[(i64, Option<i64>)]) -> InputBatch {
        let k: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0)));
        let s: ArrayRef = Arc::new(StringArray::from_iter(
            rows.iter()
                .map(|r| (r.0 % 5 != 0).then(|| format!("s{}", r.0 % 3))),
        ));
        let v: ArrayRef = Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.1)));
        let d: ArrayRef = Arc::new(
            arrow::array::Decimal128Array::from_iter(rows.iter().map(|r| r.1.map(i128::from)))
                .with_precision_and_scale(20, 2)
                .unwrap(),
        );
        let d12: ArrayRef = Arc::new(
            arrow::array::Decimal128Array::from_iter(rows.iter().map(|r| r.1.map(i128::from)))
                .with_precision_and_scale(12, 2)
                .unwrap(),
        );
        let f: ArrayRef = Arc::new(Float64Array::from_iter(
            rows.iter().map(|r| r.1.map(|x| x as f64 * 0.5)),
        ));
        let b: ArrayRef = Arc::new(arrow::array::BooleanArray::from_iter(
            rows.iter().map(|r| r.1.map(|x| x > 0)),
        ));
        let t: ArrayRef = Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.1.map(|x| format!("v{x}"))),
        ));
        // CORR's pair: the doubles and the key as a double.
        let k2: ArrayRef = Arc::new(Float64Array::from_iter_values(
            rows.iter().map(|r| (r.0 % 17) as f64),
        ));
        InputBatch::try_new(
            spec,
            vec![k, Arc::clone(&s)],
            vec![
                None,
                Some(Arc::clone(&v)),
                Some(d),
                Some(Arc::clone(&f)),
                Some(d12),
                Some(t),
                Some(b),
                Some(Arc::clone(&f)),
                Some(v),
                Some(crate::expr::tuple(vec![f, k2], rows.len()).unwrap()),
            ],
            rows.len(),
        )
        .unwrap()
    }

    fn partial(spec: &QuerySpec, input: &InputBatch) -> PartialGroups {
        let agg = Aggregation::new(spec.clone(), Default::default()).unwrap();
        let mut w = agg.worker();
        w.push(input).unwrap();
        agg.finish_partial(vec![w]).unwrap().0
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// Input cut into runs, each run's groups aggregated, spilled and read back partition
        /// by partition, then merged per partition: together they equal the reference over all
        /// of it, every aggregate's state surviving its file.
        #[test]
        fn spilled_runs_merged_by_partition_equal_the_whole(
            rows in prop::collection::vec((0i64..600, prop::option::of(-1000i64..1000)), 1..400),
            cuts in prop::collection::vec(0usize..400, 0..4),
        ) {
            let spec = spec();
            let dir = std::env::temp_dir().join(format!(
                "grouper-spill-test-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (rows.len() + 1)).collect();
            bounds.push(0);
            bounds.push(rows.len());
            bounds.sort_unstable();
            let mut runs = Vec::new();
            let mut inputs = Vec::new();
            for (i, w) in bounds.windows(2).enumerate() {
                let input = batch(&spec, &rows[w[0]..w[1]]);
                if input.num_rows() > 0 {
                    let path = dir.join(format!("run{i}.arrow"));
                    let file = File::create(&path).unwrap();
                    if let Some(run) = Run::write(&partial(&spec, &input), file, &path).unwrap() {
                        runs.push(run);
                    }
                }
                inputs.push(input);
            }
            let mut parts = Vec::new();
            for p in 0..PARTITIONS {
                let groups: Vec<PartialGroups> = runs
                    .iter()
                    .filter_map(|r| r.read(&spec, p).unwrap())
                    .collect();
                prop_assert_eq!(
                    groups.iter().map(|g| g.len as u64).sum::<u64>(),
                    runs.iter().map(|r| r.groups(p)).sum::<u64>()
                );
                if !groups.is_empty() {
                    let (cols, _) = PartialGroups::merge_all(groups, &spec.key_types)
                        .unwrap()
                        .finalize()
                        .unwrap();
                    parts.push(cols);
                }
            }
            let merged: Vec<ArrayRef> = (0..parts[0].len())
                .map(|c| {
                    let arrays: Vec<&dyn arrow::array::Array> =
                        parts.iter().map(|p| p[c].as_ref()).collect();
                    arrow::compute::concat(&arrays).unwrap()
                })
                .collect();
            let whole = reference::aggregate(&spec, &inputs).unwrap();
            std::fs::remove_dir_all(&dir).unwrap();
            prop_assert_eq!(same_groups(&whole, &merged, 2), Ok(()));
        }
    }

    #[test]
    fn a_key_lands_in_one_partition_in_every_run() {
        let spec = spec();
        let a = partial(
            &spec,
            &batch(&spec, &[(1, Some(1)), (2, None), (3, Some(3))]),
        );
        let b = partial(&spec, &batch(&spec, &[(3, Some(4)), (1, Some(5))]));
        let where_is = |g: &PartialGroups, key: i64| {
            let keys = g.keys[0]
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .clone();
            let parts = partition_rows(g).unwrap();
            parts
                .iter()
                .position(|rows| rows.iter().any(|&r| keys.value(r as usize) == key))
                .unwrap()
        };
        assert_eq!(where_is(&a, 1), where_is(&b, 1));
        assert_eq!(where_is(&a, 3), where_is(&b, 3));
    }
}
