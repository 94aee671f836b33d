//! The random case generator: a schema of 1–6 key and 1–6 value columns, data drawn from the
//! distributions that break aggregation engines (uniform, zipf, one heavy hitter, the
//! sort-based paper's exponential, Weibull and normal shapes, sorted and clustered runs, 0–50 % NULLs, values at the limits of their types, empty and one-row
//! tables), and a query mixing aggregates, expressions inside and outside them, WHERE, HAVING,
//! ORDER BY, LIMIT, GROUP BY ordinals and key expressions.
//!
//! What the generator avoids, and why (each is a documented difference, not a bug to find):
//! arithmetic that can overflow (DataFusion wraps 64-bit arithmetic, DuckDB raises), so it only
//! computes on columns marked `small`; integer `/` (DuckDB divides in floating point,
//! DataFusion truncates), so divisions cast to DOUBLE; division by zero (DuckDB yields NULL,
//! DataFusion raises for integers), so divisors go through NULLIF; float SUM over values whose
//! sum depends on the order of additions, so float sums only run over quarter-integers.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};

use crate::synthetic::{Dist, Sampler};

use super::case::{Case, ColType, Column, Order, Query, Table};
use super::value::Value;

/// Generates the case of `seed`.
pub fn generate(seed: u64) -> Case {
    let mut rng = SmallRng::seed_from_u64(seed);
    let rows = match rng.random_range(0..100) {
        0..5 => 0,
        5..10 => 1,
        10..30 => rng.random_range(2..20),
        30..70 => rng.random_range(20..500),
        70..95 => rng.random_range(500..5000),
        _ => rng.random_range(5000..30_000),
    };
    let nkeys = rng.random_range(1..=6);
    let nvals = rng.random_range(1..=6);
    let mut columns = Vec::new();
    for i in 0..nkeys {
        let ty = pick(&mut rng, KEY_TYPES);
        columns.push(key_column(&mut rng, format!("k{i}"), ty, rows));
    }
    for i in 0..nvals {
        let ty = pick(&mut rng, VALUE_TYPES);
        columns.push(value_column(&mut rng, format!("v{i}"), ty, rows));
    }
    let table = Table {
        columns,
        partitions: rng.random_range(1..=3),
    };
    let query = query(&mut rng, &table);
    Case { seed, table, query }
}

const KEY_TYPES: &[ColType] = &[
    ColType::I8,
    ColType::I16,
    ColType::I32,
    ColType::I64,
    ColType::Dec(5, 2),
    ColType::Dec(18, 3),
    ColType::Dec(38, 10),
    ColType::Date,
    ColType::Str,
    ColType::Str,
    ColType::Bool,
];

const VALUE_TYPES: &[ColType] = &[
    ColType::I8,
    ColType::I16,
    ColType::I32,
    ColType::I64,
    ColType::I64,
    ColType::U64,
    ColType::Dec(9, 2),
    ColType::Dec(15, 2),
    ColType::Dec(18, 4),
    ColType::Dec(38, 4),
    ColType::F64,
    ColType::F64,
    ColType::Str,
    ColType::Date,
    ColType::Bool,
];

fn pick<T: Copy>(rng: &mut SmallRng, xs: &[T]) -> T {
    xs[rng.random_range(0..xs.len())]
}

/// The largest magnitude of a column's values: the type's limit, or a small bound.
fn int_limits(ty: ColType) -> (i128, i128) {
    match ty {
        ColType::I8 => (i8::MIN.into(), i8::MAX.into()),
        ColType::I16 => (i16::MIN.into(), i16::MAX.into()),
        ColType::I32 => (i32::MIN.into(), i32::MAX.into()),
        ColType::U64 => (0, u64::MAX.into()),
        ColType::Dec(p, _) => {
            let m = 10i128.pow(u32::from(p)) - 1;
            (-m, m)
        }
        _ => (i64::MIN.into(), i64::MAX.into()),
    }
}

/// One random non-NULL value of `ty`; `extreme` draws near the type's limits.
fn value(rng: &mut SmallRng, ty: ColType, extreme: bool) -> Value {
    let exact = |rng: &mut SmallRng| -> i128 {
        let (lo, hi) = int_limits(ty);
        if extreme {
            match rng.random_range(0..6) {
                0 => lo,
                1 => hi,
                2 => lo + 1,
                3 => hi - 1,
                4 => rng.random_range(lo..=hi),
                _ => rng.random_range(-3..=3i128).clamp(lo, hi),
            }
        } else {
            // Small enough that `x * 2`, `x + y` and `max - min` stay in the type.
            let bound = match ty {
                ColType::I8 => 30,
                ColType::I16 => 3_000,
                ColType::Dec(p, _) if p < 6 => 10i128.pow(u32::from(p)) - 1,
                _ => 100_000,
            };
            rng.random_range(-bound..=bound).clamp(lo, hi)
        }
    };
    match ty {
        ColType::Dec(_, s) => Value::Dec(exact(rng), s),
        ColType::Date => Value::Date(if extreme {
            pick(rng, &[-700_000, 700_000, 0, -1, 2_932_000, -719_000])
        } else {
            rng.random_range(8_000..20_000)
        }),
        ColType::Str => Value::Str(string(rng, extreme)),
        ColType::Bool => Value::Bool(rng.random_bool(0.5)),
        ColType::F64 => Value::Float(if extreme {
            pick(
                rng,
                &[
                    1e300,
                    -1e300,
                    1e-300,
                    -0.0,
                    0.0,
                    f64::MAX,
                    f64::MIN,
                    0.1,
                    3.5,
                ],
            )
        } else {
            // Quarter-integers: their sums are exact in any order.
            rng.random_range(-40_000..=40_000i32) as f64 / 4.0
        }),
        _ => Value::Int(exact(rng)),
    }
}

fn string(rng: &mut SmallRng, odd: bool) -> String {
    if odd {
        let s = pick(
            rng,
            &[
                "",
                " ",
                "a ",
                " a",
                "é",
                "日本語",
                "Ω≈ç",
                "A",
                "z",
                "a'b",
                "%",
                "_",
            ],
        );
        if rng.random_bool(0.2) {
            return format!("{}{}", "long-".repeat(20), rng.random_range(0..5));
        }
        return s.to_string();
    }
    let len = rng.random_range(1..=4);
    (0..len)
        .map(|_| pick(rng, &['a', 'b', 'c', 'A', 'x']))
        .collect()
}

/// NULL fraction of a column: none in most, up to a half in some.
fn null_frac(rng: &mut SmallRng) -> f64 {
    pick(rng, &[0.0, 0.0, 0.0, 0.02, 0.1, 0.3, 0.5])
}

/// A key column: a pool of distinct values, drawn by one of the distributions.
fn key_column(rng: &mut SmallRng, name: String, ty: ColType, rows: usize) -> Column {
    let extreme = rng.random_bool(0.25);
    let card = pick(rng, &[1usize, 2, 3, 7, 30, 300, 5000]);
    let mut pool: Vec<Value> = Vec::new();
    for _ in 0..card * 2 {
        let v = value(rng, ty, extreme);
        if !pool.contains(&v) {
            pool.push(v);
        }
        if pool.len() >= card {
            break;
        }
    }
    let nulls = null_frac(rng);
    let dist: usize = rng.random_range(0..8);
    let zipf = Zipf::new(pool.len() as f64, 1.2).ok();
    // The sort-based paper's continuous shapes over the pool (exponential, Weibull, normal).
    let shape = dist
        .checked_sub(5)
        .and_then(|i| [Dist::Exponential, Dist::Weibull(2.0), Dist::Normal].get(i))
        .and_then(|&d| Sampler::new(d, pool.len() as u64, rows).ok());
    let mut values: Vec<Value> = Vec::with_capacity(rows);
    while values.len() < rows {
        let i = match (dist, &zipf, &shape) {
            (1, Some(z), _) => (z.sample(rng) as usize).saturating_sub(1),
            (2, _, _) if rng.random_bool(0.9) => 0,
            (5.., _, Some(s)) => s.group(rng, values.len()) as usize,
            _ => rng.random_range(0..pool.len()),
        };
        let v = if rng.random_bool(nulls) {
            Value::Null
        } else {
            pool[i.min(pool.len() - 1)].clone()
        };
        // Clustered: runs of one value.
        let run = if dist == 3 {
            rng.random_range(1..50)
        } else {
            1
        };
        for _ in 0..run.min(rows - values.len()) {
            values.push(v.clone());
        }
    }
    if dist == 4 {
        // Sorted.
        values.sort_by(|a, b| a.sort_cmp(b));
    }
    Column {
        name,
        ty,
        small: !extreme,
        values,
    }
}

/// A value column: independent values, small or near the type's limits.
fn value_column(rng: &mut SmallRng, name: String, ty: ColType, rows: usize) -> Column {
    let extreme = rng.random_bool(0.2);
    let nulls = if rng.random_bool(0.05) {
        1.0
    } else {
        null_frac(rng)
    };
    let values = (0..rows)
        .map(|_| {
            if rng.random_bool(nulls) {
                Value::Null
            } else {
                value(rng, ty, extreme)
            }
        })
        .collect();
    Column {
        name,
        ty,
        small: !extreme,
        values,
    }
}

/// A key expression over column `c`.
fn key_expr(rng: &mut SmallRng, c: &Column) -> String {
    let n = &c.name;
    if rng.random_bool(0.7) {
        return n.clone();
    }
    match c.ty {
        ColType::I8 | ColType::I16 | ColType::I32 | ColType::I64 => {
            if c.small && rng.random_bool(0.5) {
                format!("{n} + 1")
            } else {
                format!("{n} % 7")
            }
        }
        ColType::Dec(..) if c.small => format!("{n} * 2"),
        ColType::Str => match rng.random_range(0..4) {
            0 => format!("upper({n})"),
            1 => format!("{n} || 'x'"),
            2 => format!("substr({n}, 1, 1)"),
            _ => format!("length({n})"),
        },
        ColType::Date => format!("extract(year FROM {n})"),
        ColType::Bool => format!("NOT {n}"),
        _ => format!("CASE WHEN {n} IS NULL THEN 'none' ELSE 'some' END"),
    }
}

/// A literal of `c`'s type taken from its data (or a default), for comparisons.
fn literal(rng: &mut SmallRng, c: &Column) -> Option<String> {
    let non_null: Vec<&Value> = c.values.iter().filter(|v| **v != Value::Null).collect();
    let v = if non_null.is_empty() {
        value(rng, c.ty, false)
    } else {
        non_null[rng.random_range(0..non_null.len())].clone()
    };
    Some(match (&v, c.ty) {
        (Value::Int(i), _) if i64::try_from(*i).is_ok() => i.to_string(),
        // From a string: DataFusion 55 reads a bare 1.5 as a float, which cannot hold 18
        // digits exactly (DuckDB reads it as a decimal).
        (Value::Dec(..), ColType::Dec(p, s)) => format!("CAST('{v}' AS DECIMAL({p}, {s}))"),
        (Value::Str(s), _) => format!("'{}'", s.replace('\'', "''")),
        (Value::Date(d), _) if (-700_000..=2_900_000).contains(d) => {
            format!("DATE '{}'", civil(*d))
        }
        (Value::Float(f), _) if f.is_finite() && f.abs() < 1e15 => format!("{f:?}"),
        _ => return None,
    })
}

/// Days since 1970-01-01 as YYYY-MM-DD (proleptic Gregorian, years 1..9999).
fn civil(days: i32) -> String {
    // Howard Hinnant's days_from_civil inverse.
    let z = i64::from(days) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// One predicate over a column, for WHERE.
fn predicate(rng: &mut SmallRng, c: &Column) -> String {
    let n = &c.name;
    match rng.random_range(0..5) {
        0 => format!("{n} IS NOT NULL"),
        1 => format!("{n} IS NULL"),
        _ => match c.ty {
            ColType::Bool => {
                if rng.random_bool(0.5) {
                    n.clone()
                } else {
                    format!("NOT {n}")
                }
            }
            ColType::Str if rng.random_bool(0.4) => {
                format!("{n} LIKE '{}%'", pick(rng, &["a", "b", "", "A"]))
            }
            _ => match literal(rng, c) {
                Some(l) => format!("{n} {} {l}", pick(rng, &[">", "<=", "=", "<>", ">="])),
                None => format!("{n} IS NOT NULL"),
            },
        },
    }
}

/// Aggregate expressions that apply to a value column.
fn aggregates(c: &Column, others: &[&Column]) -> Vec<String> {
    let n = &c.name;
    let mut out = vec![
        format!("count({n})"),
        format!("min({n})"),
        format!("max({n})"),
    ];
    let summable = c.ty.is_exact_numeric() || (c.ty == ColType::F64 && c.small);
    if summable {
        out.push(format!("sum({n})"));
        out.push(format!("avg({n})"));
    }
    if c.ty.is_exact_numeric() && c.small {
        out.push(format!("sum({n} * 2)"));
        out.push(format!("sum(CASE WHEN {n} > 0 THEN {n} ELSE 0 END)"));
        out.push(format!("sum({n}) + 1"));
        out.push(format!("max({n}) - min({n})"));
        out.push(format!("coalesce(sum({n}), 0)"));
        out.push(format!("avg(abs({n}))"));
        out.push(format!("count(DISTINCT {n})"));
        for o in others {
            if o.ty.is_exact_numeric() && o.small && o.name != *n {
                out.push(format!("sum({n} + {})", o.name));
                out.push(format!("max(CAST({n} AS DOUBLE) / NULLIF({}, 0))", o.name));
            }
        }
    }
    if c.ty == ColType::F64 && c.small {
        out.push(format!("sum({n} * 2 + 0.5)"));
    }
    out
}

fn query(rng: &mut SmallRng, table: &Table) -> Query {
    let keys: Vec<&Column> = table
        .columns
        .iter()
        .filter(|c| c.name.starts_with('k'))
        .collect();
    let all: Vec<&Column> = table.columns.iter().collect();
    let nkeys = if rng.random_bool(0.1) {
        0
    } else {
        rng.random_range(1..=keys.len().min(4))
    };
    let mut chosen: Vec<&Column> = Vec::new();
    while chosen.len() < nkeys {
        let c = keys[rng.random_range(0..keys.len())];
        if !chosen.iter().any(|x| x.name == c.name) {
            chosen.push(c);
        }
    }
    let mut key_exprs: Vec<String> = Vec::new();
    for c in &chosen {
        let e = key_expr(rng, c);
        if !key_exprs.contains(&e) {
            key_exprs.push(e);
        }
    }
    // Aggregates over value columns mostly, key columns sometimes.
    let mut pool = vec!["count(*)".to_string()];
    for c in &all {
        if c.name.starts_with('v') || rng.random_bool(0.2) {
            pool.extend(aggregates(c, &all));
        }
    }
    let naggs = rng.random_range(1..=5);
    let mut aggs: Vec<String> = Vec::new();
    for _ in 0..naggs * 2 {
        let a = pool[rng.random_range(0..pool.len())].clone();
        if !aggs.contains(&a) {
            aggs.push(a);
        }
        if aggs.len() == naggs {
            break;
        }
    }
    let filter = rng.random_bool(0.4).then(|| {
        let i = rng.random_range(0..all.len());
        let a = predicate(rng, all[i]);
        if rng.random_bool(0.4) {
            let j = rng.random_range(0..all.len());
            let b = predicate(rng, all[j]);
            format!("({a}) {} ({b})", pick(rng, &["AND", "OR"]))
        } else {
            a
        }
    });
    let having = (!key_exprs.is_empty() && rng.random_bool(0.25)).then(|| {
        let small: Vec<&&Column> = all
            .iter()
            .filter(|c| c.small && c.ty.is_exact_numeric())
            .collect();
        match (rng.random_range(0..3), small.first()) {
            (1, Some(c)) => format!("sum({}) > 0", c.name),
            (2, Some(c)) => format!("max({}) IS NOT NULL", c.name),
            _ => format!("count(*) > {}", rng.random_range(0..3)),
        }
    });
    let order = if rng.random_bool(0.3) {
        // LIMIT: order by every key, so the order is total.
        let mut items: Vec<String> = Vec::new();
        if rng.random_bool(0.3) && aggs.iter().any(|a| a == "count(*)") {
            items.push("count(*) DESC".into());
        }
        for i in 1..=key_exprs.len() {
            items.push(format!(
                "{i} {} NULLS {}",
                pick(rng, &["ASC", "DESC"]),
                pick(rng, &["FIRST", "LAST"])
            ));
        }
        Some(Order {
            items,
            limit: Some(pick(rng, &[1, 3, 10, 100])),
        })
    } else if rng.random_bool(0.2) && !key_exprs.is_empty() {
        Some(Order {
            items: vec!["1".into()],
            limit: None,
        })
    } else {
        None
    };
    Query {
        ordinals: rng.random_bool(0.3),
        keys: key_exprs,
        aggs,
        filter,
        having,
        order,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil(0), "1970-01-01");
        assert_eq!(civil(-1), "1969-12-31");
        assert_eq!(civil(19_000), "2022-01-08");
        assert_eq!(civil(-719_162), "0001-01-01");
    }

    #[test]
    fn cases_are_deterministic_and_valid() {
        for seed in 0..200 {
            let c = generate(seed);
            assert_eq!(c, generate(seed));
            let b = c.table.batch().expect("a generated table builds");
            assert_eq!(b.num_rows(), c.table.rows());
            assert!(!c.query.aggs.is_empty());
            // Every generated value survives the Arrow round trip (no silent NULLs).
            for (col, arr) in c.table.columns.iter().zip(b.columns()) {
                let nulls = col.values.iter().filter(|v| **v == Value::Null).count();
                assert_eq!(arr.null_count(), nulls, "{}", col.name);
            }
        }
    }
}
