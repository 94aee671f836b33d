//! A small expression IR for what sits just below an aggregate: the filter and the projections
//! that compute keys and aggregate arguments (Tomé fuses them into the aggregation kernel).
//!
//! The DataFusion glue translates physical expressions into this IR where it can (columns,
//! literals, arithmetic, comparisons, AND/OR/NOT, IS [NOT] NULL, CAST, CASE, dates as day
//! numbers); [`cuda`] compiles it into the generated kernel, and [`Expr::eval`] interprets it one
//! row at a time on the CPU — the obviously-right reference the GPU code is tested against.
//!
//! Semantics are DataFusion's: integer arithmetic wraps, integer division by zero is an error,
//! floats compare in IEEE total order, AND/OR are Kleene (three-valued), a filter keeps rows whose
//! predicate is true (not NULL), decimals are scaled integers in 128 bits whose `+ - *` fail on
//! i128 overflow (Arrow's checked kernels). Only widening casts are accepted ([`Expr::check`]);
//! anything else stays in DataFusion.

pub mod select;
pub mod vector;

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Decimal128Array, Float32Array, Float64Array,
    PrimitiveArray,
};
use arrow::datatypes::{
    DataType, Date32Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};

use crate::error::{GrouperError, Result};

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    And,
    Or,
}

impl BinOp {
    fn is_arithmetic(self) -> bool {
        matches!(self, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div)
    }
    fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::NotEq | BinOp::Lt | BinOp::LtEq | BinOp::Gt | BinOp::GtEq
        )
    }
}

/// A scalar value: integers, dates and unscaled decimals as `Int`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// SQL NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// Any integer, a date's day number or a decimal's unscaled value.
    Int(i128),
    /// A float or double.
    Float(f64),
}

/// An expression over the columns of the batches the aggregate reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// Column `index` of the input.
    Column { index: usize, data_type: DataType },
    /// A constant.
    Literal { value: Scalar, data_type: DataType },
    /// `left op right`; `data_type` is the result type DataFusion planned.
    Binary {
        op: BinOp,
        left: Box<Expr>,
        right: Box<Expr>,
        data_type: DataType,
    },
    /// Boolean NOT.
    Not(Box<Expr>),
    /// `x IS NULL` (`negated`: IS NOT NULL).
    IsNull { expr: Box<Expr>, negated: bool },
    /// Arithmetic negation.
    Negative(Box<Expr>),
    /// `CAST(expr AS to)`.
    Cast { expr: Box<Expr>, to: DataType },
    /// `CASE WHEN c THEN v ... ELSE e END`.
    Case {
        whens: Vec<(Expr, Expr)>,
        otherwise: Option<Box<Expr>>,
        data_type: DataType,
    },
    /// The arguments of a multi-argument aggregate (`CORR(x, y)`) as one value per row: a
    /// struct of [`tuple_type`], NULL where any part is (the aggregate skips such rows). Only
    /// an aggregate's whole argument is a tuple, never an operand.
    Tuple(Vec<Expr>),
}

/// The type of a [`Expr::Tuple`] of parts of `types`: a struct of fields `c0`, `c1`, ...
pub fn tuple_type(types: &[DataType]) -> DataType {
    DataType::Struct(
        types
            .iter()
            .enumerate()
            .map(|(i, t)| arrow::datatypes::Field::new(format!("c{i}"), t.clone(), true))
            .collect(),
    )
}

fn unsupported(what: String) -> GrouperError {
    GrouperError::Unsupported(format!("expression {what}"))
}

/// Whether the IR handles values of `t`.
pub fn supports_type(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Float32
            | DataType::Float64
            | DataType::Date32
            | DataType::Decimal128(..)
    )
}

/// Signed integer bits of an integer type (None for others).
fn int_bits(t: &DataType) -> Option<(bool, u32)> {
    Some(match t {
        DataType::Int8 => (true, 8),
        DataType::Int16 => (true, 16),
        DataType::Int32 | DataType::Date32 => (true, 32),
        DataType::Int64 => (true, 64),
        DataType::UInt8 => (false, 8),
        DataType::UInt16 => (false, 16),
        DataType::UInt32 => (false, 32),
        DataType::UInt64 => (false, 64),
        _ => return None,
    })
}

fn is_int(t: &DataType) -> bool {
    int_bits(t).is_some() && *t != DataType::Date32
}

fn is_float(t: &DataType) -> bool {
    matches!(t, DataType::Float32 | DataType::Float64)
}

/// Decimal digits needed by every value of an integer type.
fn int_digits(t: &DataType) -> Option<u8> {
    Some(match int_bits(t)? {
        (_, 8) => 3,
        (_, 16) => 5,
        (_, 32) => 10,
        (true, 64) => 19,
        _ => 20,
    })
}

/// Wraps `v` to the width of integer type `t` (two's complement), as Arrow's wrapping kernels.
fn wrap(v: i128, t: &DataType) -> i128 {
    match int_bits(t) {
        Some((true, 8)) => v as i8 as i128,
        Some((true, 16)) => v as i16 as i128,
        Some((true, 32)) => v as i32 as i128,
        Some((true, 64)) => v as i64 as i128,
        Some((false, 8)) => v as u8 as i128,
        Some((false, 16)) => v as u16 as i128,
        Some((false, 32)) => v as u32 as i128,
        Some((false, 64)) => v as u64 as i128,
        _ => v,
    }
}

/// IEEE total-order key of a float (what Arrow's comparison kernels compare).
pub fn total_order(v: f64, t: &DataType) -> i64 {
    if *t == DataType::Float32 {
        let b = (v as f32).to_bits() as i32;
        (b ^ (((b >> 31) as u32) >> 1) as i32) as i64
    } else {
        let b = v.to_bits() as i64;
        b ^ (((b >> 63) as u64) >> 1) as i64
    }
}

impl Expr {
    /// A column reference.
    pub fn column(index: usize, data_type: DataType) -> Self {
        Expr::Column { index, data_type }
    }

    /// The result type.
    pub fn data_type(&self) -> DataType {
        match self {
            Expr::Column { data_type, .. }
            | Expr::Literal { data_type, .. }
            | Expr::Binary { data_type, .. }
            | Expr::Case { data_type, .. } => data_type.clone(),
            Expr::Not(_) | Expr::IsNull { .. } => DataType::Boolean,
            Expr::Negative(e) => e.data_type(),
            Expr::Cast { to, .. } => to.clone(),
            Expr::Tuple(parts) => {
                tuple_type(&parts.iter().map(Expr::data_type).collect::<Vec<_>>())
            }
        }
    }

    /// The columns read, sorted and deduplicated (appended to `out`).
    pub fn columns(&self, out: &mut Vec<usize>) {
        self.visit(&mut |e| {
            if let Expr::Column { index, .. } = e {
                out.push(*index);
            }
        });
        out.sort_unstable();
        out.dedup();
    }

    /// Whether the expression can be NULL on some row, when column `i` can be NULL exactly
    /// where `nullable(i)` says (conservative: `true` when unsure).
    pub fn may_be_null(&self, nullable: &dyn Fn(usize) -> bool) -> bool {
        match self {
            Expr::Column { index, .. } => nullable(*index),
            Expr::Literal { value, .. } => *value == Scalar::Null,
            Expr::Binary { left, right, .. } => {
                left.may_be_null(nullable) || right.may_be_null(nullable)
            }
            Expr::Not(e) | Expr::Negative(e) => e.may_be_null(nullable),
            Expr::Cast { expr, .. } => expr.may_be_null(nullable),
            Expr::IsNull { .. } => false,
            Expr::Tuple(parts) => parts.iter().any(|p| p.may_be_null(nullable)),
            Expr::Case {
                whens, otherwise, ..
            } => match otherwise {
                None => true,
                Some(o) => {
                    o.may_be_null(nullable) || whens.iter().any(|(_, v)| v.may_be_null(nullable))
                }
            },
        }
    }

    /// Checks that every column read exists in `types` with the type the expression expects.
    pub fn check_columns(&self, types: &[DataType]) -> Result<()> {
        let mut bad = None;
        self.visit(&mut |e| {
            if let Expr::Column { index, data_type } = e {
                if types.get(*index) != Some(data_type) {
                    bad = Some(*index);
                }
            }
        });
        match bad {
            None => Ok(()),
            Some(i) => Err(GrouperError::InvalidInput(format!(
                "expression column {i} is missing or of another type"
            ))),
        }
    }

    /// Calls `f` on every node.
    fn visit(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Column { .. } | Expr::Literal { .. } => {}
            Expr::Binary { left, right, .. } => {
                left.visit(f);
                right.visit(f);
            }
            Expr::Not(e) | Expr::Negative(e) | Expr::IsNull { expr: e, .. } => e.visit(f),
            Expr::Cast { expr, .. } => expr.visit(f),
            Expr::Tuple(parts) => parts.iter().for_each(|p| p.visit(f)),
            Expr::Case {
                whens, otherwise, ..
            } => {
                for (c, v) in whens {
                    c.visit(f);
                    v.visit(f);
                }
                if let Some(o) = otherwise {
                    o.visit(f);
                }
            }
        }
    }

    /// Checks that every node is one the IR evaluates exactly; the error names the first that
    /// is not (the caller then leaves the expression to DataFusion).
    pub fn check(&self) -> Result<()> {
        if let Expr::Tuple(parts) = self {
            for p in parts {
                if matches!(p, Expr::Tuple(_)) {
                    return Err(unsupported("a tuple inside a tuple".into()));
                }
                p.check()?;
            }
            return Ok(());
        }
        let t = self.data_type();
        if !supports_type(&t) {
            return Err(unsupported(format!("of type {t}")));
        }
        match self {
            Expr::Column { .. } => Ok(()),
            Expr::Literal { value, .. } => match (value, &t) {
                (Scalar::Null, _)
                | (Scalar::Bool(_), DataType::Boolean)
                | (Scalar::Float(_), DataType::Float32 | DataType::Float64) => Ok(()),
                (Scalar::Int(_), t)
                    if int_bits(t).is_some() || matches!(t, DataType::Decimal128(..)) =>
                {
                    Ok(())
                }
                _ => Err(unsupported(format!("literal {value:?} of type {t}"))),
            },
            Expr::Binary {
                op,
                left,
                right,
                data_type,
            } => {
                left.check()?;
                right.check()?;
                let (lt, rt) = (left.data_type(), right.data_type());
                let ok = if op.is_comparison() {
                    lt == rt && *data_type == DataType::Boolean
                } else if matches!(op, BinOp::And | BinOp::Or) {
                    lt == DataType::Boolean && rt == DataType::Boolean
                } else {
                    match (&lt, &rt, data_type) {
                        (
                            DataType::Decimal128(p1, s1),
                            DataType::Decimal128(p2, s2),
                            DataType::Decimal128(p, s),
                        ) => decimal_result(*op, (*p1, *s1), (*p2, *s2)) == Some((*p, *s)),
                        _ => lt == rt && lt == *data_type && (is_int(&lt) || is_float(&lt)),
                    }
                };
                if ok {
                    Ok(())
                } else {
                    Err(unsupported(format!("{lt} {op:?} {rt} -> {data_type}")))
                }
            }
            Expr::Not(e) => {
                e.check()?;
                (e.data_type() == DataType::Boolean)
                    .then_some(())
                    .ok_or_else(|| unsupported("NOT of a non-boolean".into()))
            }
            Expr::IsNull { expr, .. } => expr.check(),
            Expr::Negative(e) => {
                e.check()?;
                let t = e.data_type();
                (matches!(int_bits(&t), Some((true, _))) && t != DataType::Date32
                    || is_float(&t)
                    || matches!(t, DataType::Decimal128(..)))
                .then_some(())
                .ok_or_else(|| unsupported(format!("negation of {t}")))
            }
            Expr::Cast { expr, to } => {
                expr.check()?;
                let from = expr.data_type();
                cast_supported(&from, to)
                    .then_some(())
                    .ok_or_else(|| unsupported(format!("CAST({from} AS {to})")))
            }
            Expr::Tuple(_) => Err(unsupported("a tuple as an operand".into())),
            Expr::Case {
                whens,
                otherwise,
                data_type,
            } => {
                for (c, v) in whens {
                    c.check()?;
                    v.check()?;
                    if c.data_type() != DataType::Boolean || v.data_type() != *data_type {
                        return Err(unsupported("CASE with mixed types".into()));
                    }
                }
                if let Some(o) = otherwise {
                    o.check()?;
                    if o.data_type() != *data_type {
                        return Err(unsupported("CASE with mixed types".into()));
                    }
                }
                Ok(())
            }
        }
    }

    /// Evaluates the expression for one row of `columns` (the reference interpreter). A
    /// [`Expr::Tuple`] has no scalar value: [`Expr::evaluate`] builds its struct.
    pub fn eval(&self, columns: &[ArrayRef], row: usize) -> Result<Scalar> {
        Ok(match self {
            Expr::Tuple(_) => return Err(unsupported("a tuple as an operand".into())),
            Expr::Column { index, .. } => read_scalar(&columns[*index], row),
            Expr::Literal { value, .. } => *value,
            Expr::Binary {
                op,
                left,
                right,
                data_type,
            } => {
                let (a, b) = (left.eval(columns, row)?, right.eval(columns, row)?);
                eval_binary(*op, a, b, &left.data_type(), &right.data_type(), data_type)?
            }
            Expr::Not(e) => match e.eval(columns, row)? {
                Scalar::Bool(b) => Scalar::Bool(!b),
                _ => Scalar::Null,
            },
            Expr::IsNull { expr, negated } => {
                Scalar::Bool((expr.eval(columns, row)? == Scalar::Null) != *negated)
            }
            Expr::Negative(e) => {
                let t = e.data_type();
                match e.eval(columns, row)? {
                    Scalar::Int(v) => Scalar::Int(wrap(v.wrapping_neg(), &t)),
                    Scalar::Float(v) => Scalar::Float(-v),
                    other => other,
                }
            }
            Expr::Cast { expr, to } => cast_scalar(expr.eval(columns, row)?, &expr.data_type(), to),
            Expr::Case {
                whens, otherwise, ..
            } => {
                for (c, v) in whens {
                    if c.eval(columns, row)? == Scalar::Bool(true) {
                        return v.eval(columns, row);
                    }
                }
                match otherwise {
                    Some(o) => o.eval(columns, row)?,
                    None => Scalar::Null,
                }
            }
        })
    }

    /// Evaluates the expression over all rows into an array of its type (reference path).
    pub fn evaluate(&self, columns: &[ArrayRef], rows: usize) -> Result<ArrayRef> {
        if let Expr::Tuple(parts) = self {
            let parts = parts
                .iter()
                .map(|p| p.evaluate(columns, rows))
                .collect::<Result<Vec<_>>>()?;
            return tuple(parts, rows);
        }
        let values = (0..rows)
            .map(|r| self.eval(columns, r))
            .collect::<Result<Vec<_>>>()?;
        to_array(&self.data_type(), &values)
    }
}

/// The struct of a [`Expr::Tuple`] whose parts are `parts` (of `rows` rows), NULL where any
/// part is.
pub fn tuple(parts: Vec<ArrayRef>, rows: usize) -> Result<ArrayRef> {
    let DataType::Struct(fields) = tuple_type(
        &parts
            .iter()
            .map(|p| p.data_type().clone())
            .collect::<Vec<_>>(),
    ) else {
        unreachable!("tuple_type is a struct")
    };
    let nulls = parts.iter().fold(None, |acc, p| {
        arrow::buffer::NullBuffer::union(acc.as_ref(), p.logical_nulls().as_ref())
    });
    Ok(Arc::new(arrow::array::StructArray::try_new_with_length(
        fields, parts, nulls, rows,
    )?))
}

/// DataFusion's result type of decimal `op` (precision capped at 38), for `+ - *`.
pub fn decimal_result(op: BinOp, (p1, s1): (u8, i8), (p2, s2): (u8, i8)) -> Option<(u8, i8)> {
    let (p1, s1, p2, s2) = (p1 as i32, s1 as i32, p2 as i32, s2 as i32);
    let (p, s) = match op {
        BinOp::Add | BinOp::Sub => {
            let s = s1.max(s2);
            ((p1 - s1).max(p2 - s2) + s + 1, s)
        }
        BinOp::Mul => (p1 + p2 + 1, s1 + s2),
        _ => return None,
    };
    (0..=38).contains(&s).then_some((p.min(38) as u8, s as i8))
}

fn cast_supported(from: &DataType, to: &DataType) -> bool {
    if from == to {
        return true;
    }
    match (from, to) {
        (f, t) if is_int(f) && is_int(t) => {
            let ((fs, fb), (ts, tb)) = (
                int_bits(f).unwrap_or((true, 64)),
                int_bits(t).unwrap_or((true, 64)),
            );
            // widening only: every value of `from` is a value of `to`
            (fs == ts && tb >= fb) || (!fs && ts && tb > fb)
        }
        (f, t) if is_int(f) && is_float(t) => true,
        (DataType::Float32, DataType::Float64) => true,
        (f, DataType::Decimal128(p, s)) if is_int(f) => {
            int_digits(f).is_some_and(|d| (*p as i32 - *s as i32) >= d as i32) && *s >= 0
        }
        (DataType::Decimal128(p1, s1), DataType::Decimal128(p2, s2)) => {
            s2 >= s1 && (*p2 as i32 - *s2 as i32) >= (*p1 as i32 - *s1 as i32)
        }
        (DataType::Decimal128(..), DataType::Float64) => true,
        _ => false,
    }
}

fn pow10(k: i32) -> i128 {
    10i128.pow(k.max(0) as u32)
}

fn cast_scalar(v: Scalar, from: &DataType, to: &DataType) -> Scalar {
    match (v, to) {
        (Scalar::Null, _) => Scalar::Null,
        (Scalar::Int(i), DataType::Float32) => Scalar::Float(i as f32 as f64),
        (Scalar::Int(i), DataType::Float64) => match from {
            DataType::Decimal128(_, s) => Scalar::Float(i as f64 / 10f64.powi(*s as i32)),
            _ => Scalar::Float(i as f64),
        },
        (Scalar::Int(i), DataType::Decimal128(_, s)) => {
            let from_scale = match from {
                DataType::Decimal128(_, fs) => *fs as i32,
                _ => 0,
            };
            Scalar::Int(i * pow10(*s as i32 - from_scale))
        }
        (Scalar::Int(i), t) => Scalar::Int(wrap(i, t)),
        (Scalar::Float(f), DataType::Float32) => Scalar::Float(f as f32 as f64),
        (other, _) => other,
    }
}

fn eval_binary(
    op: BinOp,
    a: Scalar,
    b: Scalar,
    lt: &DataType,
    rt: &DataType,
    out: &DataType,
) -> Result<Scalar> {
    use Scalar::*;
    if op == BinOp::And || op == BinOp::Or {
        let (a, b) = (as_bool(a), as_bool(b));
        let dominant = op == BinOp::Or; // true dominates OR, false dominates AND
        return Ok(match (a, b) {
            (Some(x), _) if x == dominant => Bool(dominant),
            (_, Some(y)) if y == dominant => Bool(dominant),
            (Some(_), Some(_)) => Bool(!dominant),
            _ => Null,
        });
    }
    if a == Null || b == Null {
        return Ok(Null);
    }
    if op.is_comparison() {
        let ord = match (a, b) {
            (Int(x), Int(y)) => x.cmp(&y),
            (Float(x), Float(y)) => total_order(x, lt).cmp(&total_order(y, rt)),
            (Bool(x), Bool(y)) => x.cmp(&y),
            _ => return Ok(Null),
        };
        use std::cmp::Ordering::*;
        let r = match op {
            BinOp::Eq => ord == Equal,
            BinOp::NotEq => ord != Equal,
            BinOp::Lt => ord == Less,
            BinOp::LtEq => ord != Greater,
            BinOp::Gt => ord == Greater,
            _ => ord != Less,
        };
        return Ok(Bool(r));
    }
    debug_assert!(op.is_arithmetic());
    Ok(match (a, b) {
        (Float(x), Float(y)) => {
            let r = match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                _ => x / y,
            };
            Float(if *out == DataType::Float32 {
                r as f32 as f64
            } else {
                r
            })
        }
        (Int(x), Int(y)) => {
            if let (
                DataType::Decimal128(_, s1),
                DataType::Decimal128(_, s2),
                DataType::Decimal128(_, s),
            ) = (lt, rt, out)
            {
                let (x, y) = match op {
                    BinOp::Mul => (x, y),
                    _ => (rescale(x, *s - *s1)?, rescale(y, *s - *s2)?),
                };
                let r = match op {
                    BinOp::Add => x.checked_add(y),
                    BinOp::Sub => x.checked_sub(y),
                    _ => x.checked_mul(y),
                };
                return r.map(Int).ok_or_else(|| {
                    GrouperError::InvalidInput(format!("decimal overflow in {op:?} of {out}"))
                });
            }
            let r = match op {
                BinOp::Add => x.wrapping_add(y),
                BinOp::Sub => x.wrapping_sub(y),
                BinOp::Mul => x.wrapping_mul(y),
                _ => {
                    if y == 0 {
                        return Err(GrouperError::InvalidInput("division by zero".into()));
                    }
                    x.wrapping_div(y)
                }
            };
            Int(wrap(r, out))
        }
        _ => Null,
    })
}

/// `v * 10^k`, failing on i128 overflow.
fn rescale(v: i128, k: i8) -> Result<i128> {
    v.checked_mul(pow10(k as i32))
        .ok_or_else(|| GrouperError::InvalidInput("decimal overflow while rescaling".into()))
}

fn as_bool(v: Scalar) -> Option<bool> {
    match v {
        Scalar::Bool(b) => Some(b),
        _ => None,
    }
}

/// Row `row` of `array` as a scalar.
pub fn read_scalar(array: &ArrayRef, row: usize) -> Scalar {
    if array.is_null(row) {
        return Scalar::Null;
    }
    macro_rules! int {
        ($t:ty) => {
            Scalar::Int(array.as_primitive::<$t>().value(row) as i128)
        };
    }
    match array.data_type() {
        DataType::Boolean => Scalar::Bool(array.as_boolean().value(row)),
        DataType::Int8 => int!(Int8Type),
        DataType::Int16 => int!(Int16Type),
        DataType::Int32 => int!(Int32Type),
        DataType::Int64 => int!(Int64Type),
        DataType::UInt8 => int!(UInt8Type),
        DataType::UInt16 => int!(UInt16Type),
        DataType::UInt32 => int!(UInt32Type),
        DataType::UInt64 => int!(UInt64Type),
        DataType::Date32 => int!(Date32Type),
        DataType::Decimal128(..) => Scalar::Int(
            array
                .as_primitive::<arrow::datatypes::Decimal128Type>()
                .value(row),
        ),
        DataType::Float32 => Scalar::Float(
            array
                .as_primitive::<arrow::datatypes::Float32Type>()
                .value(row) as f64,
        ),
        DataType::Float64 => Scalar::Float(
            array
                .as_primitive::<arrow::datatypes::Float64Type>()
                .value(row),
        ),
        _ => Scalar::Null,
    }
}

/// Scalars of one type as an array.
pub fn to_array(t: &DataType, values: &[Scalar]) -> Result<ArrayRef> {
    let int = |v: &Scalar| match v {
        Scalar::Int(i) => Some(*i),
        _ => None,
    };
    let float = |v: &Scalar| match v {
        Scalar::Float(f) => Some(*f),
        _ => None,
    };
    macro_rules! prim {
        ($t:ty, $n:ty) => {
            Arc::new(
                values
                    .iter()
                    .map(|v| int(v).map(|i| i as $n))
                    .collect::<PrimitiveArray<$t>>(),
            ) as ArrayRef
        };
    }
    Ok(match t {
        DataType::Boolean => Arc::new(values.iter().map(|v| as_bool(*v)).collect::<BooleanArray>()),
        DataType::Int8 => prim!(Int8Type, i8),
        DataType::Int16 => prim!(Int16Type, i16),
        DataType::Int32 => prim!(Int32Type, i32),
        DataType::Int64 => prim!(Int64Type, i64),
        DataType::UInt8 => prim!(UInt8Type, u8),
        DataType::UInt16 => prim!(UInt16Type, u16),
        DataType::UInt32 => prim!(UInt32Type, u32),
        DataType::UInt64 => prim!(UInt64Type, u64),
        DataType::Date32 => prim!(Date32Type, i32),
        DataType::Float32 => Arc::new(
            values
                .iter()
                .map(|v| float(v).map(|f| f as f32))
                .collect::<Float32Array>(),
        ),
        DataType::Float64 => Arc::new(values.iter().map(float).collect::<Float64Array>()),
        DataType::Decimal128(p, s) => Arc::new(
            values
                .iter()
                .map(int)
                .collect::<Decimal128Array>()
                .with_precision_and_scale(*p, *s)?,
        ),
        other => {
            return Err(GrouperError::UnsupportedType {
                what: "expression result",
                data_type: other.clone(),
            })
        }
    })
}

#[cfg(test)]
mod tests;
