//! [`TupleExpr`]: the arguments of a multi-argument aggregate (`CORR(x, y)`) as one
//! expression, so that every aggregate keeps one argument from the rule to the algebra. It
//! evaluates to the struct of [`grouper_core::expr::tuple_type`], NULL where any part is
//! (the rows the aggregate skips), and the fused pipeline translates it to
//! [`grouper_core::expr::Expr::Tuple`].

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use arrow::datatypes::{DataType, Schema};
use arrow::record_batch::RecordBatch;
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::PhysicalExpr;

/// The parts of an aggregate's argument, one struct per row.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TupleExpr {
    parts: Vec<Arc<dyn PhysicalExpr>>,
}

impl TupleExpr {
    /// The tuple of `parts`, in argument order.
    pub fn new(parts: Vec<Arc<dyn PhysicalExpr>>) -> Self {
        Self { parts }
    }

    /// The parts, in argument order.
    pub fn parts(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.parts
    }
}

impl fmt::Display for TupleExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.parts.iter().map(ToString::to_string).collect();
        write!(f, "({})", parts.join(", "))
    }
}

impl PhysicalExpr for TupleExpr {
    fn data_type(&self, input_schema: &Schema) -> Result<DataType> {
        let types = self
            .parts
            .iter()
            .map(|p| p.data_type(input_schema))
            .collect::<Result<Vec<_>>>()?;
        Ok(grouper_core::expr::tuple_type(&types))
    }

    fn nullable(&self, input_schema: &Schema) -> Result<bool> {
        self.parts
            .iter()
            .try_fold(false, |any, p| Ok(any || p.nullable(input_schema)?))
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let rows = batch.num_rows();
        let parts = self
            .parts
            .iter()
            .map(|p| p.evaluate(batch)?.into_array(rows))
            .collect::<Result<Vec<_>>>()?;
        let tuple = grouper_core::expr::tuple(parts, rows)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        Ok(ColumnarValue::Array(tuple))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        self.parts.iter().collect()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        Ok(Arc::new(TupleExpr::new(children)))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        for (i, p) in self.parts.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            p.fmt_sql(f)?;
        }
        f.write_str(")")
    }
}
