//! Translating what sits just below an aggregate (filters, projections) from DataFusion's
//! physical expressions into grouper's expression IR, so the GPU kernel evaluates them fused
//! with the aggregation (Tomé) and reads the scan's columns directly.
//!
//! ```text
//!  AggregateExec(keys, args over P)        GroupByExec(keys, args) + Fused {
//!    ProjectionExec P                         source: the scan,
//!      FilterExec F            ==>            filter: IR of F over the scan's columns,
//!        [Repartition]                        keys:   scan columns, args: IR of P∘args }
//!          scan (source)
//! ```
//!
//! Anything that does not translate ends the walk: the fused source is then the node above it,
//! still computed by DataFusion on the CPU. Keys must be plain source columns (their codec is
//! planned from the column's values).
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use std::sync::Arc;

use arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{
    BinaryExpr, CaseExpr, CastExpr, Column, IsNotNullExpr, IsNullExpr, Literal, NegativeExpr,
    NotExpr,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::ExecutionPlan;
use grouper_core::expr::{BinOp, Expr, Scalar};

use crate::tuple_expr::TupleExpr;

/// The aggregate's input, rewritten over a source further down.
#[derive(Debug, Clone)]
pub struct Fused {
    /// The node whose batches the kernel reads.
    pub source: Arc<dyn ExecutionPlan>,
    /// Rows pass when true (the conjunction of the absorbed filters).
    pub filter: Option<Expr>,
    /// Source column of each group key.
    pub keys: Vec<usize>,
    /// IR of each aggregate argument over the source's columns.
    pub args: Vec<Option<Expr>>,
    /// Types of the source's columns.
    pub columns: Vec<DataType>,
}

/// The columns of a plan node's output as IR over the chain's source.
struct Chain {
    source: Arc<dyn ExecutionPlan>,
    filters: Vec<Expr>,
    columns: Vec<Option<Expr>>,
}

fn identity(plan: &Arc<dyn ExecutionPlan>) -> Chain {
    let schema = plan.schema();
    Chain {
        source: Arc::clone(plan),
        filters: vec![],
        columns: schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| Some(Expr::column(i, f.data_type().clone())))
            .collect(),
    }
}

fn walk(plan: &Arc<dyn ExecutionPlan>) -> Chain {
    if let Some(p) = plan.downcast_ref::<ProjectionExec>() {
        let inner = walk(p.input());
        let schema = p.input().schema();
        let columns = p
            .expr()
            .iter()
            .map(|pe| to_ir(&pe.expr, &schema, &inner.columns))
            .collect();
        return Chain { columns, ..inner };
    }
    if let Some(f) = plan.downcast_ref::<FilterExec>() {
        if f.fetch().is_some() {
            return identity(plan);
        }
        let inner = walk(f.input());
        let schema = f.input().schema();
        let Some(pred) = to_ir(f.predicate(), &schema, &inner.columns) else {
            return identity(plan);
        };
        let mut filters = inner.filters;
        filters.push(pred);
        let columns = match f.projection() {
            Some(proj) => proj
                .iter()
                .map(|&i| inner.columns.get(i).cloned().flatten())
                .collect(),
            None => inner.columns,
        };
        return Chain {
            source: inner.source,
            filters,
            columns,
        };
    }
    if let Some(r) = plan.downcast_ref::<RepartitionExec>() {
        // Partitioning does not change rows: the GPU reads every partition.
        return walk(r.input());
    }
    identity(plan)
}

/// The fused form of an aggregate over `input` with `keys` and `args` (over `input`'s schema),
/// or `None` when something does not translate or nothing would be absorbed.
pub fn fuse(
    input: &Arc<dyn ExecutionPlan>,
    keys: &[Arc<dyn PhysicalExpr>],
    args: &[Option<Arc<dyn PhysicalExpr>>],
) -> Option<Fused> {
    let chain = walk(input);
    let schema = input.schema();
    let mut key_cols = Vec::with_capacity(keys.len());
    for k in keys {
        match to_ir(k, &schema, &chain.columns)? {
            Expr::Column { index, .. } => key_cols.push(index),
            _ => return None,
        }
    }
    let mut ir_args = Vec::with_capacity(args.len());
    for a in args {
        ir_args.push(match a {
            None => None,
            Some(a) => Some(to_ir(a, &schema, &chain.columns)?),
        });
    }
    let filter = chain.filters.into_iter().reduce(|a, b| Expr::Binary {
        op: BinOp::And,
        left: Box::new(a),
        right: Box::new(b),
        data_type: DataType::Boolean,
    });
    if filter.as_ref().is_some_and(|f| f.check().is_err())
        || ir_args.iter().flatten().any(|a| a.check().is_err())
    {
        return None;
    }
    let columns = chain
        .source
        .schema()
        .fields()
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    Some(Fused {
        source: chain.source,
        filter,
        keys: key_cols,
        args: ir_args,
        columns,
    })
}

fn scalar(v: &ScalarValue) -> Option<(Scalar, DataType)> {
    let t = v.data_type();
    if v.is_null() {
        return grouper_core::expr::supports_type(&t).then_some((Scalar::Null, t));
    }
    let s = match v {
        ScalarValue::Boolean(Some(b)) => Scalar::Bool(*b),
        ScalarValue::Int8(Some(x)) => Scalar::Int(*x as i128),
        ScalarValue::Int16(Some(x)) => Scalar::Int(*x as i128),
        ScalarValue::Int32(Some(x)) => Scalar::Int(*x as i128),
        ScalarValue::Int64(Some(x)) => Scalar::Int(*x as i128),
        ScalarValue::UInt8(Some(x)) => Scalar::Int(*x as i128),
        ScalarValue::UInt16(Some(x)) => Scalar::Int(*x as i128),
        ScalarValue::UInt32(Some(x)) => Scalar::Int(*x as i128),
        ScalarValue::UInt64(Some(x)) => Scalar::Int(*x as i128),
        ScalarValue::Date32(Some(x)) => Scalar::Int(*x as i128),
        ScalarValue::Decimal128(Some(x), _, _) => Scalar::Int(*x),
        ScalarValue::Float32(Some(x)) => Scalar::Float(*x as f64),
        ScalarValue::Float64(Some(x)) => Scalar::Float(*x),
        _ => return None,
    };
    Some((s, t))
}

fn binop(op: &Operator) -> Option<BinOp> {
    Some(match op {
        Operator::Plus => BinOp::Add,
        Operator::Minus => BinOp::Sub,
        Operator::Multiply => BinOp::Mul,
        Operator::Divide => BinOp::Div,
        Operator::Eq => BinOp::Eq,
        Operator::NotEq => BinOp::NotEq,
        Operator::Lt => BinOp::Lt,
        Operator::LtEq => BinOp::LtEq,
        Operator::Gt => BinOp::Gt,
        Operator::GtEq => BinOp::GtEq,
        Operator::And => BinOp::And,
        Operator::Or => BinOp::Or,
        _ => return None,
    })
}

/// IR of `e` (over `schema`), with column `i` replaced by `columns[i]`.
fn to_ir(e: &Arc<dyn PhysicalExpr>, schema: &Schema, columns: &[Option<Expr>]) -> Option<Expr> {
    let ir = translate(e, schema, columns);
    if ir.is_none() && std::env::var_os("GROUPER_DEBUG_FUSE").is_some() {
        eprintln!("not translated: {e} ({:?})", e.data_type(schema));
    }
    ir
}

fn translate(e: &Arc<dyn PhysicalExpr>, schema: &Schema, columns: &[Option<Expr>]) -> Option<Expr> {
    // A column passes through whatever its type (string keys are columns the GPU reads as
    // dictionary codes); computed values must have a type the IR evaluates.
    if let Some(c) = e.downcast_ref::<Column>() {
        return columns.get(c.index()).cloned().flatten();
    }
    if let Some(t) = e.downcast_ref::<TupleExpr>() {
        return t
            .parts()
            .iter()
            .map(|p| to_ir(p, schema, columns))
            .collect::<Option<Vec<_>>>()
            .map(Expr::Tuple);
    }
    let t = e.data_type(schema).ok()?;
    if !grouper_core::expr::supports_type(&t) {
        return None;
    }
    let ir = |x: &Arc<dyn PhysicalExpr>| to_ir(x, schema, columns).map(Box::new);
    if let Some(l) = e.downcast_ref::<Literal>() {
        let (value, data_type) = scalar(l.value())?;
        return Some(Expr::Literal { value, data_type });
    }
    if let Some(b) = e.downcast_ref::<BinaryExpr>() {
        return Some(Expr::Binary {
            op: binop(b.op())?,
            left: ir(b.left())?,
            right: ir(b.right())?,
            data_type: t,
        });
    }
    if let Some(n) = e.downcast_ref::<NotExpr>() {
        return Some(Expr::Not(ir(n.arg())?));
    }
    if let Some(n) = e.downcast_ref::<IsNullExpr>() {
        return Some(Expr::IsNull {
            expr: ir(n.arg())?,
            negated: false,
        });
    }
    if let Some(n) = e.downcast_ref::<IsNotNullExpr>() {
        return Some(Expr::IsNull {
            expr: ir(n.arg())?,
            negated: true,
        });
    }
    if let Some(n) = e.downcast_ref::<NegativeExpr>() {
        return Some(Expr::Negative(ir(n.arg())?));
    }
    if let Some(c) = e.downcast_ref::<CastExpr>() {
        return Some(Expr::Cast {
            expr: ir(c.expr())?,
            to: c.cast_type().clone(),
        });
    }
    if let Some(c) = e.downcast_ref::<CaseExpr>() {
        let base = match c.expr() {
            Some(b) => Some(to_ir(b, schema, columns)?),
            None => None,
        };
        let mut whens = Vec::new();
        for (w, then) in c.when_then_expr() {
            let cond = match &base {
                // CASE b WHEN v THEN ...: the branch is taken where b = v.
                Some(b) => Expr::Binary {
                    op: BinOp::Eq,
                    left: Box::new(b.clone()),
                    right: ir(w)?,
                    data_type: DataType::Boolean,
                },
                None => *ir(w)?,
            };
            whens.push((cond, *ir(then)?));
        }
        let otherwise = match c.else_expr() {
            Some(x) => Some(ir(x)?),
            None => None,
        };
        return Some(Expr::Case {
            whens,
            otherwise,
            data_type: t,
        });
    }
    None
}
