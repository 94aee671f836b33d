//! A differential test case: a typed table (its data as canonical values, so a case saves and
//! shrinks as plain JSON) and a structured query (so the shrinker can drop its parts).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int16Array, Int32Array,
    Int64Array, Int8Array, RecordBatch, StringArray, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Schema};
use serde::{Deserialize, Serialize};

use super::value::Value;

/// Column types the generator draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ColType {
    I8,
    I16,
    I32,
    I64,
    U64,
    /// DECIMAL(precision, scale).
    Dec(u8, i8),
    Date,
    Str,
    Bool,
    F64,
}

impl ColType {
    /// The Arrow type of the column.
    pub fn arrow(self) -> DataType {
        match self {
            ColType::I8 => DataType::Int8,
            ColType::I16 => DataType::Int16,
            ColType::I32 => DataType::Int32,
            ColType::I64 => DataType::Int64,
            ColType::U64 => DataType::UInt64,
            ColType::Dec(p, s) => DataType::Decimal128(p, s),
            ColType::Date => DataType::Date32,
            ColType::Str => DataType::Utf8,
            ColType::Bool => DataType::Boolean,
            ColType::F64 => DataType::Float64,
        }
    }

    /// Integers and decimals: exact arithmetic, SUM and AVG apply.
    pub fn is_exact_numeric(self) -> bool {
        matches!(
            self,
            ColType::I8
                | ColType::I16
                | ColType::I32
                | ColType::I64
                | ColType::U64
                | ColType::Dec(..)
        )
    }
}

/// One column: name, type, whether its values stay small (arithmetic on them cannot overflow
/// and float sums are exact), and one value per row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    pub ty: ColType,
    pub small: bool,
    pub values: Vec<Value>,
}

/// The table `t` of a case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub columns: Vec<Column>,
    /// Partitions the rows are split into (DataFusion then plans partial and final phases).
    pub partitions: usize,
}

impl Table {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |c| c.values.len())
    }

    /// The table as one record batch.
    pub fn batch(&self) -> Result<RecordBatch, arrow::error::ArrowError> {
        let fields: Vec<Field> = self
            .columns
            .iter()
            .map(|c| Field::new(&c.name, c.ty.arrow(), true))
            .collect();
        let arrays = self
            .columns
            .iter()
            .map(array)
            .collect::<Result<Vec<_>, _>>()?;
        RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
    }

    /// The batch split into `partitions` slices.
    pub fn partitioned(&self) -> Result<Vec<Vec<RecordBatch>>, arrow::error::ArrowError> {
        let b = self.batch()?;
        let n = b.num_rows();
        let p = self.partitions.max(1);
        Ok((0..p)
            .map(|i| vec![b.slice(n * i / p, n * (i + 1) / p - n * i / p)])
            .collect())
    }
}

fn int(v: &Value) -> Option<i128> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

/// The Arrow array of a column.
fn array(c: &Column) -> Result<ArrayRef, arrow::error::ArrowError> {
    let vals = &c.values;
    Ok(match c.ty {
        ColType::I8 => Arc::new(Int8Array::from_iter(
            vals.iter()
                .map(|v| int(v).and_then(|i| i8::try_from(i).ok())),
        )),
        ColType::I16 => Arc::new(Int16Array::from_iter(
            vals.iter()
                .map(|v| int(v).and_then(|i| i16::try_from(i).ok())),
        )),
        ColType::I32 => Arc::new(Int32Array::from_iter(
            vals.iter()
                .map(|v| int(v).and_then(|i| i32::try_from(i).ok())),
        )),
        ColType::I64 => Arc::new(Int64Array::from_iter(
            vals.iter()
                .map(|v| int(v).and_then(|i| i64::try_from(i).ok())),
        )),
        ColType::U64 => Arc::new(UInt64Array::from_iter(
            vals.iter()
                .map(|v| int(v).and_then(|i| u64::try_from(i).ok())),
        )),
        ColType::Dec(p, s) => Arc::new(
            Decimal128Array::from_iter(vals.iter().map(|v| match v {
                Value::Dec(x, _) => Some(*x),
                _ => None,
            }))
            .with_precision_and_scale(p, s)?,
        ),
        ColType::Date => Arc::new(Date32Array::from_iter(vals.iter().map(|v| match v {
            Value::Date(d) => Some(*d),
            _ => None,
        }))),
        ColType::Str => Arc::new(StringArray::from_iter(vals.iter().map(|v| match v {
            Value::Str(s) => Some(s.as_str()),
            _ => None,
        }))),
        ColType::Bool => Arc::new(BooleanArray::from_iter(vals.iter().map(|v| match v {
            Value::Bool(b) => Some(*b),
            _ => None,
        }))),
        ColType::F64 => Arc::new(Float64Array::from_iter(vals.iter().map(|v| match v {
            Value::Float(f) => Some(*f),
            _ => None,
        }))),
    })
}

/// How results are ordered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Order {
    /// ORDER BY items in SQL (ordinals with direction and NULLS placement).
    pub items: Vec<String>,
    /// LIMIT, if any. The items then order every key, so the order is total and rows compare
    /// in order.
    pub limit: Option<u32>,
}

/// A query over `t`: SELECT keys..., aggregates... [WHERE] [GROUP BY] [HAVING] [ORDER BY] [LIMIT].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Query {
    /// Group key expressions (selected first, in this order).
    pub keys: Vec<String>,
    /// Aggregate expressions (possibly with expressions around or inside them).
    pub aggs: Vec<String>,
    pub filter: Option<String>,
    pub having: Option<String>,
    pub order: Option<Order>,
    /// GROUP BY 1, 2, ... instead of repeating the key expressions.
    pub ordinals: bool,
}

impl Query {
    /// The query as SQL.
    pub fn sql(&self) -> String {
        let select: Vec<&str> = self
            .keys
            .iter()
            .chain(&self.aggs)
            .map(String::as_str)
            .collect();
        let mut sql = format!("SELECT {} FROM t", select.join(", "));
        if let Some(f) = &self.filter {
            sql += &format!(" WHERE {f}");
        }
        if !self.keys.is_empty() {
            let by: Vec<String> = if self.ordinals {
                (1..=self.keys.len()).map(|i| i.to_string()).collect()
            } else {
                self.keys.clone()
            };
            sql += &format!(" GROUP BY {}", by.join(", "));
        }
        if let Some(h) = &self.having {
            sql += &format!(" HAVING {h}");
        }
        if let Some(o) = &self.order {
            if !o.items.is_empty() {
                sql += &format!(" ORDER BY {}", o.items.join(", "));
            }
            if let Some(l) = o.limit {
                sql += &format!(" LIMIT {l}");
            }
        }
        sql
    }

    /// The same query without HAVING, ORDER BY and LIMIT, if it had any: every group's
    /// aggregates, for checking that an overflow grouper reports is real.
    pub fn unfiltered(&self) -> Option<Query> {
        (self.having.is_some() || self.order.is_some()).then(|| Query {
            having: None,
            order: None,
            ..self.clone()
        })
    }

    /// Simpler variants of the query, each one step away (no HAVING, no WHERE, no ORDER BY, no
    /// ordinals, one aggregate or one key fewer): the shrinkers' query steps.
    pub fn simpler(&self) -> Vec<Query> {
        let mut out = Vec::new();
        let mut with = |f: &dyn Fn(&mut Query)| {
            let mut q = self.clone();
            f(&mut q);
            if q != *self {
                out.push(q);
            }
        };
        with(&|q| q.having = None);
        with(&|q| q.filter = None);
        with(&|q| q.order = None);
        with(&|q| q.ordinals = false);
        if self.aggs.len() > 1 {
            for i in 0..self.aggs.len() {
                with(&|q| {
                    q.aggs.remove(i);
                });
            }
        }
        for i in 0..self.keys.len() {
            with(&|q| {
                q.keys.remove(i);
                // ORDER BY ordinals and HAVING may not hold with one key fewer.
                q.order = None;
                if q.keys.is_empty() {
                    q.having = None;
                }
            });
        }
        out
    }

    /// Whether rows must compare in order (ORDER BY over every key, with LIMIT).
    pub fn ordered(&self) -> bool {
        self.order.as_ref().is_some_and(|o| o.limit.is_some())
    }
}

/// A generated case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// The seed it was generated from.
    pub seed: u64,
    pub table: Table,
    pub query: Query,
}
