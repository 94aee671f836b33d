//! DataFusion's pruning of a Parquet scan by the scan's predicate, applied as its opener applies
//! it (row groups by their statistics, then rows by the page index), for grouper's own readers
//! of the scan's files: the CPU's pooled scan ([`super::pooled_scan`]) and the GPU's pages
//! (`super::pages`). Pruning is conservative: a row group or page is left out only where its
//! statistics prove no row passes the predicate; the query's filter still runs on what is read.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::datasource::physical_plan::parquet::{
    PagePruningAccessPlanFilter, ParquetAccessPlan, ParquetFileMetrics, RowGroupAccessPlanFilter,
};
use datafusion::datasource::physical_plan::{FileSource, ParquetSource};
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::physical_optimizer::pruning::{PruningPredicate, PruningPredicateBuilder};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;

/// The pruning a Parquet scan's options allow for its predicate, over files of the scan's
/// table schema.
pub(crate) struct ScanPruning {
    table: SchemaRef,
    row_groups: Option<Arc<PruningPredicate>>,
    pages: Option<PagePruningAccessPlanFilter>,
    metrics: ExecutionPlanMetricsSet,
}

impl ScanPruning {
    /// The pruning of `parquet`'s predicate (none without one, or where its options turn
    /// pruning or the page index off) over files of schema `table`.
    pub(crate) fn new(parquet: &ParquetSource, table: SchemaRef) -> Self {
        let predicate = parquet.filter();
        let options = &parquet.table_parquet_options().global;
        let row_groups = predicate
            .as_ref()
            .filter(|_| options.pruning)
            .and_then(|p| {
                PruningPredicateBuilder::new()
                    .with_file_schema(Arc::clone(&table))
                    .build(Arc::clone(p))
            });
        let pages = predicate
            .as_ref()
            .filter(|_| options.enable_page_index)
            .map(|p| PagePruningAccessPlanFilter::new(p, Arc::clone(&table)));
        Self {
            table,
            row_groups,
            pages,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// Whether the predicate may prune row groups by their statistics.
    #[cfg(feature = "gpu")]
    pub(crate) fn prunes_row_groups(&self) -> bool {
        self.row_groups.is_some()
    }

    /// The row groups of the file `name` (of footer `metadata`) the predicate may select, and
    /// where `pages` and the file has a page index, the rows within them.
    pub(crate) fn access_plan(
        &self,
        name: &str,
        metadata: &ParquetMetaData,
        pages: bool,
    ) -> ParquetAccessPlan {
        let groups = metadata.row_groups();
        let mut plan = ParquetAccessPlan::new_all(groups.len());
        let file_metrics = ParquetFileMetrics::new(0, name, &self.metrics);
        let parquet_schema = metadata.file_metadata().schema_descr();
        if let Some(p) = &self.row_groups {
            let mut filter = RowGroupAccessPlanFilter::new(plan);
            filter.prune_by_statistics(&self.table, parquet_schema, groups, p, &file_metrics);
            plan = filter.build();
        }
        let page_index = pages && metadata.offset_index().is_some();
        if let Some(p) = self.pages.as_ref().filter(|_| page_index) {
            plan = p.prune_plan_with_page_index(
                plan,
                &self.table,
                parquet_schema,
                metadata,
                &file_metrics,
            );
        }
        plan
    }
}
