//! Regression files: a shrunk case with DuckDB's answer, as JSON under
//! `crates/grouper-cli/tests/it/regressions/`. CI replays them on every target without DuckDB.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::case::Case;
use super::duckdb::Answer;
use super::value::Value;

/// A saved case.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Regression {
    /// What was found: the target and the mismatch, before the fix.
    pub found: String,
    /// DuckDB's version that answered.
    pub duckdb: String,
    pub case: Case,
    /// DuckDB's answer.
    #[serde(with = "answer")]
    pub expected: Answer,
}

mod answer {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::Value;

    #[derive(Serialize, Deserialize)]
    enum Stored {
        Rows(Vec<Vec<Value>>),
        Error(String),
    }

    pub fn serialize<S: Serializer>(a: &super::Answer, s: S) -> Result<S::Ok, S::Error> {
        match a {
            Ok(r) => Stored::Rows(r.clone()),
            Err(e) => Stored::Error(e.clone()),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<super::Answer, D::Error> {
        Ok(match Stored::deserialize(d)? {
            Stored::Rows(r) => Ok(r),
            Stored::Error(e) => Err(e),
        })
    }
}

/// Writes `r` to `dir` as `<seed>-<target>.json`; returns the path.
pub fn save(dir: &Path, r: &Regression) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let target: String = r
        .found
        .split(':')
        .take(2)
        .collect::<Vec<_>>()
        .join("-")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let path = dir.join(format!("{:016x}-{target}.json", r.case.seed));
    std::fs::write(&path, serde_json::to_string_pretty(r)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Every regression file in `dir`, sorted by name.
pub fn load_all(dir: &Path) -> Result<Vec<(PathBuf, Regression)>> {
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect(),
        Err(_) => Vec::new(),
    };
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p)
                .with_context(|| format!("cannot read {}", p.display()))?;
            let r = serde_json::from_str(&text)
                .with_context(|| format!("{} is not a regression file", p.display()))?;
            Ok((p, r))
        })
        .collect()
}
