//! Filter precomputation (Tomé §3.6): the CPU evaluates a query's filter over a batch and the
//! GPU receives one selection bit per row instead of the columns only the filter reads.
//!
//! Comparisons of a column with a column or a literal of the same non-float type, AND, OR, NOT
//! and IS [NOT] NULL of a column run as Arrow's vectorised kernels (whose semantics are
//! DataFusion's: Kleene logic, NULL compares to NULL); anything else falls back to the
//! reference interpreter ([`Expr::evaluate`]) for that node only. A row is selected when the
//! filter is true (NULL drops it, as a WHERE does).

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Datum, Scalar as ArrowScalar};
use arrow::compute::kernels::{boolean, cmp};
use arrow::compute::prep_null_mask_filter;
use arrow::datatypes::DataType;

use super::{to_array, BinOp, Expr};
use crate::error::{GrouperError, Result};

/// The selection of `filter` over `rows` rows of `columns`: true where the filter holds, with
/// no NULLs.
pub fn selection(filter: &Expr, columns: &[ArrayRef], rows: usize) -> Result<BooleanArray> {
    let value = vectorised(filter, columns, rows)?;
    let b = value
        .as_boolean_opt()
        .ok_or_else(|| GrouperError::InvalidInput("the filter is not boolean".into()))?;
    Ok(if b.null_count() > 0 {
        prep_null_mask_filter(b)
    } else {
        b.clone()
    })
}

/// Whether [`selection`] evaluates every node of `filter` with Arrow's kernels (none falls back
/// to the row-at-a-time reference), so that a CPU pipeline can take the filter over from
/// DataFusion without being slower.
pub fn fully_vectorised(filter: &Expr) -> bool {
    let plain = |e: &Expr| matches!(e, Expr::Column { .. } | Expr::Literal { .. });
    match filter {
        Expr::Column { data_type, .. } => *data_type == DataType::Boolean,
        Expr::Binary {
            op: BinOp::And | BinOp::Or,
            left,
            right,
            ..
        } => fully_vectorised(left) && fully_vectorised(right),
        Expr::Binary { left, right, .. } => {
            left.data_type() == right.data_type()
                && arrow_compares(&left.data_type())
                && plain(left)
                && plain(right)
                && !(matches!(left.as_ref(), Expr::Literal { .. })
                    && matches!(right.as_ref(), Expr::Literal { .. }))
        }
        Expr::Not(inner) => fully_vectorised(inner),
        Expr::IsNull { expr, .. } => matches!(expr.as_ref(), Expr::Column { .. }),
        _ => false,
    }
}

/// Whether Arrow's comparison kernels order values of `t` as the IR does (floats differ in
/// how the IR's total order and Arrow treat -0.0; they take the reference path).
fn arrow_compares(t: &DataType) -> bool {
    t.is_integer() || matches!(t, DataType::Date32 | DataType::Decimal128(..))
}

/// A comparison operand: a column as is, a literal as a one-row scalar.
fn operand(e: &Expr, columns: &[ArrayRef], rows: usize) -> Result<Box<dyn Datum>> {
    Ok(match e {
        Expr::Literal { value, data_type } => {
            Box::new(ArrowScalar::new(to_array(data_type, &[*value])?))
        }
        e => Box::new(vectorised(e, columns, rows)?),
    })
}

fn vectorised(e: &Expr, columns: &[ArrayRef], rows: usize) -> Result<ArrayRef> {
    let as_bool = |a: &ArrayRef| -> Result<BooleanArray> {
        a.as_boolean_opt()
            .cloned()
            .ok_or_else(|| GrouperError::InvalidInput("a boolean operand is not boolean".into()))
    };
    let out: ArrayRef = match e {
        Expr::Column { index, .. } => columns
            .get(*index)
            .cloned()
            .ok_or_else(|| GrouperError::InvalidInput(format!("no column {index}")))?,
        Expr::Binary {
            op, left, right, ..
        } if matches!(op, BinOp::And | BinOp::Or) => {
            let l = as_bool(&vectorised(left, columns, rows)?)?;
            let r = as_bool(&vectorised(right, columns, rows)?)?;
            std::sync::Arc::new(match op {
                BinOp::And => boolean::and_kleene(&l, &r)?,
                _ => boolean::or_kleene(&l, &r)?,
            })
        }
        Expr::Binary {
            op, left, right, ..
        } if left.data_type() == right.data_type()
            && arrow_compares(&left.data_type())
            && !matches!(
                (left.as_ref(), right.as_ref()),
                (Expr::Literal { .. }, Expr::Literal { .. })
            ) =>
        {
            let (l, r) = (
                operand(left, columns, rows)?,
                operand(right, columns, rows)?,
            );
            let (l, r) = (l.as_ref(), r.as_ref());
            std::sync::Arc::new(match op {
                BinOp::Eq => cmp::eq(l, r)?,
                BinOp::NotEq => cmp::neq(l, r)?,
                BinOp::Lt => cmp::lt(l, r)?,
                BinOp::LtEq => cmp::lt_eq(l, r)?,
                BinOp::Gt => cmp::gt(l, r)?,
                BinOp::GtEq => cmp::gt_eq(l, r)?,
                _ => return e.evaluate(columns, rows),
            })
        }
        Expr::Not(inner) => {
            std::sync::Arc::new(boolean::not(&as_bool(&vectorised(inner, columns, rows)?)?)?)
        }
        Expr::IsNull { expr, negated } if matches!(expr.as_ref(), Expr::Column { .. }) => {
            let a = vectorised(expr, columns, rows)?;
            std::sync::Arc::new(if *negated {
                arrow::compute::is_not_null(&a)?
            } else {
                arrow::compute::is_null(&a)?
            })
        }
        e => e.evaluate(columns, rows)?,
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Date32Array, Decimal128Array, Float64Array, Int32Array};
    use proptest::prelude::*;

    use super::*;
    use crate::expr::Scalar;

    fn col(i: usize, t: DataType) -> Expr {
        Expr::column(i, t)
    }

    fn lit(v: Scalar, t: DataType) -> Expr {
        Expr::Literal {
            value: v,
            data_type: t,
        }
    }

    fn bin(op: BinOp, l: Expr, r: Expr) -> Expr {
        Expr::Binary {
            op,
            left: Box::new(l),
            right: Box::new(r),
            data_type: DataType::Boolean,
        }
    }

    /// The reference: each row through the interpreter, NULL dropping the row.
    fn reference(e: &Expr, cols: &[ArrayRef], rows: usize) -> Vec<bool> {
        (0..rows)
            .map(|r| e.eval(cols, r).unwrap() == Scalar::Bool(true))
            .collect()
    }

    proptest! {
        /// Every operator, NULLs included, against the row-at-a-time interpreter.
        #[test]
        fn selection_equals_the_interpreter(
            a in proptest::collection::vec(proptest::option::of(-5i32..5), 0..200),
            seed in 0u64..1000,
            op in 0usize..6,
            k in -5i32..5,
        ) {
            let n = a.len();
            let b: Vec<Option<i32>> = (0..n)
                .map(|i| (!(i as u64 * 7 + seed).is_multiple_of(11)).then_some(((i as u64 + seed) % 9) as i32 - 4))
                .collect();
            let d: Vec<Option<i32>> = a.iter().map(|v| v.map(|v| 19000 + v)).collect();
            let f: Vec<Option<f64>> = b.iter().map(|v| v.map(|v| v as f64 * 0.5)).collect();
            let m: Vec<Option<i128>> = a.iter().map(|v| v.map(|v| v as i128 * 100)).collect();
            let cols: Vec<ArrayRef> = vec![
                Arc::new(Int32Array::from(a.clone())),
                Arc::new(Int32Array::from(b)),
                Arc::new(Date32Array::from(d)),
                Arc::new(Float64Array::from(f)),
                Arc::new(Decimal128Array::from(m).with_precision_and_scale(15, 2).unwrap()),
            ];
            let ops = [BinOp::Eq, BinOp::NotEq, BinOp::Lt, BinOp::LtEq, BinOp::Gt, BinOp::GtEq];
            let i32t = DataType::Int32;
            let dec = DataType::Decimal128(15, 2);
            let c1 = bin(ops[op], col(0, i32t.clone()), lit(Scalar::Int(k as i128), i32t.clone()));
            let c2 = bin(ops[(op + 1) % 6], col(0, i32t.clone()), col(1, i32t.clone()));
            let c3 = bin(ops[(op + 2) % 6], col(2, DataType::Date32), lit(Scalar::Int(19000 + k as i128), DataType::Date32));
            let c4 = bin(ops[(op + 3) % 6], col(3, DataType::Float64), lit(Scalar::Float(k as f64 * 0.5), DataType::Float64));
            let c5 = bin(ops[(op + 4) % 6], lit(Scalar::Int(k as i128 * 100), dec.clone()), col(4, dec));
            let filters = [
                c1.clone(),
                bin(BinOp::And, c1.clone(), c2.clone()),
                bin(BinOp::Or, c3.clone(), Expr::Not(Box::new(c4.clone()))),
                bin(BinOp::And, c5.clone(), Expr::IsNull { expr: Box::new(col(1, i32t.clone())), negated: seed.is_multiple_of(2) }),
                bin(BinOp::Or, bin(BinOp::And, c2, c3), bin(BinOp::And, c4, c5)),
            ];
            for f in &filters {
                let got = selection(f, &cols, n).unwrap();
                prop_assert_eq!(got.null_count(), 0);
                let got: Vec<bool> = got.iter().map(|v| v.unwrap_or(false)).collect();
                prop_assert_eq!(got, reference(f, &cols, n), "{:?}", f);
            }
        }
    }

    #[test]
    fn fully_vectorised_names_what_takes_no_reference_path() {
        let i = DataType::Int32;
        let c = bin(BinOp::Lt, col(0, i.clone()), lit(Scalar::Int(3), i.clone()));
        assert!(fully_vectorised(&c));
        assert!(fully_vectorised(&bin(
            BinOp::And,
            c.clone(),
            Expr::Not(Box::new(c.clone()))
        )));
        let f = DataType::Float64;
        assert!(!fully_vectorised(&bin(
            BinOp::Lt,
            col(0, f.clone()),
            lit(Scalar::Float(1.0), f)
        )));
        let sum = Expr::Binary {
            op: BinOp::Add,
            left: Box::new(col(0, i.clone())),
            right: Box::new(col(1, i.clone())),
            data_type: i.clone(),
        };
        assert!(!fully_vectorised(&bin(BinOp::Lt, sum, col(2, i))));
    }

    #[test]
    fn a_non_boolean_filter_is_an_error() {
        let cols: Vec<ArrayRef> = vec![Arc::new(Int32Array::from(vec![1, 2]))];
        assert!(selection(&col(0, DataType::Int32), &cols, 2).is_err());
    }
}
