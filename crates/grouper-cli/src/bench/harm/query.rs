//! The timing twin's queries: 1–6 keys (columns of every kind, expressions over them, the
//! `c, c - 1, c - 2, c - 3` fan web analytics runs), a few aggregates over the measures and
//! keys, sometimes a filter (string, range, NULL tests), HAVING, or a top-10 by an aggregate.
//! They reuse difftest's [`Query`] (its SQL, its shrinking steps); answers are compared between
//! the engines, not with DuckDB.
//!
//! Also the issue's own measurements ([`named`]): a web-analytics table and its four queries
//! that ran 4.5–11× slower under `auto` than under DataFusion alone.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::table::{measures, ColSpec, Kind, TableSpec};
use crate::difftest::case::{Order, Query};

fn pick<'a, T>(rng: &mut SmallRng, xs: &'a [T]) -> &'a T {
    &xs[rng.random_range(0..xs.len())]
}

/// The random query of `seed` over `table`.
pub fn random(seed: u64, table: &TableSpec) -> Query {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x9e7);
    let keys: Vec<&ColSpec> = table.keys().collect();
    let mut exprs: Vec<String> = Vec::new();
    let ints: Vec<&&ColSpec> = keys.iter().filter(|c| c.kind.is_integer()).collect();
    if !ints.is_empty() && rng.random_bool(0.08) {
        // The fan of expressions over one integer column (ClickBench's Q35 shape).
        let c = &pick(&mut rng, &ints).name;
        exprs = vec![
            c.clone(),
            format!("{c} - 1"),
            format!("{c} - 2"),
            format!("{c} - 3"),
        ];
    } else {
        let n = *pick(&mut rng, &[1usize, 1, 1, 2, 2, 2, 3, 3, 4, 5, 6]);
        let mut chosen: Vec<&ColSpec> = Vec::new();
        for _ in 0..n * 3 {
            let c = *pick(&mut rng, &keys);
            if !chosen.iter().any(|x| x.name == c.name) {
                chosen.push(c);
            }
            if chosen.len() == n {
                break;
            }
        }
        for c in chosen {
            let e = key_expr(&mut rng, c);
            if !exprs.contains(&e) {
                exprs.push(e);
            }
        }
    }
    let mut pool: Vec<String> = vec![
        "count(*)".into(),
        "sum(v0)".into(),
        "avg(v1)".into(),
        "min(v2)".into(),
        "max(v0)".into(),
        "sum(v1)".into(),
        "avg(v2)".into(),
        "sum(v0 * 2)".into(),
    ];
    for c in &keys {
        pool.push(format!("count({})", c.name));
        pool.push(format!("max({})", c.name));
    }
    let naggs = *pick(&mut rng, &[1usize, 1, 2, 3, 4]);
    let mut aggs: Vec<String> = Vec::new();
    for _ in 0..naggs * 3 {
        let a = pick(&mut rng, &pool).clone();
        if !aggs.contains(&a) {
            aggs.push(a);
        }
        if aggs.len() == naggs {
            break;
        }
    }
    if rng.random_bool(0.04) {
        let c = &pick(&mut rng, &keys).name;
        aggs.push(format!("count(DISTINCT {c})"));
    }
    let filter = rng.random_bool(0.35).then(|| {
        let c = pick(&mut rng, &table.columns);
        let a = predicate(&mut rng, c);
        if rng.random_bool(0.3) {
            let c = pick(&mut rng, &table.columns);
            let b = predicate(&mut rng, c);
            format!("({a}) AND ({b})")
        } else {
            a
        }
    });
    let having = rng
        .random_bool(0.1)
        .then(|| format!("count(*) > {}", pick(&mut rng, &[1, 2, 10])));
    // A top 10 by the first aggregate, then every key: a total order, so both engines keep
    // the same rows at ties.
    let order = rng.random_bool(0.25).then(|| Order {
        items: std::iter::once(format!("{} DESC", exprs.len() + 1))
            .chain((1..=exprs.len()).map(|i| i.to_string()))
            .collect(),
        limit: Some(10),
    });
    Query {
        keys: exprs,
        aggs,
        filter,
        having,
        order,
        ordinals: rng.random_bool(0.3),
    }
}

/// A key expression over `c`: mostly the column, else an expression of its type.
fn key_expr(rng: &mut SmallRng, c: &ColSpec) -> String {
    let n = &c.name;
    if rng.random_bool(0.7) {
        return n.clone();
    }
    match c.kind {
        k if k.is_integer() => pick(
            rng,
            &[
                format!("{n} - 1"),
                format!("{n} % 7"),
                format!("{n} / 100"),
                format!("CASE WHEN {n} > 0 THEN 'pos' ELSE 'other' END"),
            ],
        )
        .clone(),
        Kind::Tag { .. } | Kind::Url { .. } => pick(
            rng,
            &[
                format!("upper({n})"),
                format!("substr({n}, 1, 12)"),
                format!("length({n})"),
            ],
        )
        .clone(),
        Kind::Date { .. } => pick(
            rng,
            &[
                format!("extract(year FROM {n})"),
                format!("date_trunc('month', {n})"),
            ],
        )
        .clone(),
        Kind::Decimal { .. } => format!("{n} * 2"),
        Kind::Float { .. } => format!("round({n})"),
        _ => format!("NOT {n}"),
    }
}

/// A predicate over column `c`.
fn predicate(rng: &mut SmallRng, c: &ColSpec) -> String {
    let n = &c.name;
    if rng.random_bool(0.15) {
        return format!("{n} IS NOT NULL");
    }
    match c.kind {
        Kind::Tag { .. } => pick(
            rng,
            &[
                format!("{n} <> ''"),
                format!("{n} LIKE 'tag1%'"),
                format!("{n} > 'tag5'"),
            ],
        )
        .clone(),
        Kind::Url { .. } => pick(
            rng,
            &[
                format!("{n} LIKE '%shop%'"),
                format!("{n} NOT LIKE 'https://site1%'"),
            ],
        )
        .clone(),
        Kind::Date { .. } => format!("{n} >= DATE '2019-04-01'"),
        Kind::Bool => n.clone(),
        Kind::WideIds { .. } => format!("{n} % 3 <> 0"),
        Kind::Decimal { .. } => format!("{n} > CAST('50.00' AS DECIMAL(15, 2))"),
        Kind::Float { .. } => format!("{n} < 1000.0"),
        _ if n.starts_with('v') => format!("{n} < 500000"),
        _ => format!("{n} % 2 = 0"),
    }
}

/// The measurements: a web-analytics table of `rows` rows and its four queries, named.
pub fn named(rows: usize) -> (TableSpec, Vec<(&'static str, Query)>) {
    let col = |name: &str, kind| ColSpec {
        name: name.into(),
        kind,
        nulls: 0.0,
    };
    let mut columns = vec![
        col("k_user", Kind::WideIds { card: rows as u64 }),
        col("k_watch", Kind::WideIds { card: rows as u64 }),
        col(
            "k_url",
            Kind::Url {
                card: (rows / 4).max(1) as u64,
            },
        ),
        col(
            "k_phrase",
            Kind::Tag {
                card: 50_000,
                empty: 0.8,
            },
        ),
        col(
            "k_ip",
            Kind::Int32 {
                card: u64::MAX >> 33,
            },
        ),
        col("k_region", Kind::Int32 { card: 300 }),
        col("k_date", Kind::Date { days: 30 }),
    ];
    columns.extend(measures());
    let table = TableSpec {
        seed: 2026,
        rows,
        columns,
    };
    let q = |keys: &[&str], aggs: &[&str], filter: Option<&str>| Query {
        keys: keys.iter().map(|s| s.to_string()).collect(),
        aggs: aggs.iter().map(|s| s.to_string()).collect(),
        filter: filter.map(str::to_string),
        having: None,
        order: None,
        ordinals: true,
    };
    let queries = vec![
        (
            "two random ids, filtered on a string",
            q(
                &["k_user", "k_watch"],
                &["count(*)", "sum(v0)"],
                Some("k_phrase <> ''"),
            ),
        ),
        ("a URL", q(&["k_url"], &["count(*)"], None)),
        (
            "four expressions of one integer column",
            q(
                &["k_ip", "k_ip - 1", "k_ip - 2", "k_ip - 3"],
                &["count(*)"],
                None,
            ),
        ),
        (
            "three keys, one a string",
            q(
                &["k_region", "k_date", "k_phrase"],
                &["count(*)", "avg(v1)"],
                None,
            ),
        ),
    ];
    (table, queries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_deterministic_and_group_by_their_keys() {
        let table = TableSpec::random(5, 1 << 20);
        let mut fans = 0;
        for seed in 0..300 {
            let q = random(seed, &table);
            assert_eq!(q, random(seed, &table));
            assert!(!q.keys.is_empty() && q.keys.len() <= 6, "{}", q.sql());
            assert!(!q.aggs.is_empty());
            let sql = q.sql();
            assert!(sql.contains(" GROUP BY "), "{sql}");
            fans += usize::from(q.keys.iter().any(|k| k.ends_with(" - 3")));
        }
        assert!(fans > 0, "the expression fan is drawn");
    }
}
