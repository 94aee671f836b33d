//! DuckDB as the oracle: one long-lived Python process (`scripts/duckdb_oracle.py`) that
//! answers queries over Parquet files this side writes, one JSON line each way.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{anyhow, bail, Context, Result};
use datafusion::parquet::arrow::ArrowWriter;
use serde_json::Value as Json;

use super::case::Table;
use super::value::{parse_decimal, parse_float, Value};

/// What DuckDB answered: rows, or its one-line error.
pub type Answer = std::result::Result<Vec<Vec<Value>>, String>;

/// A running DuckDB oracle.
pub struct Oracle {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    dir: PathBuf,
    files: u64,
    /// DuckDB's version.
    pub version: String,
}

impl Oracle {
    /// Starts `python scripts/duckdb_oracle.py` from the repository at `root`; data files go
    /// to a fresh directory under the system's temporary directory.
    pub fn start(python: &Path, root: &Path) -> Result<Self> {
        let script = root.join("scripts/duckdb_oracle.py");
        let mut child = Command::new(python)
            .arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start {} {}", python.display(), script.display()))?;
        let stdin = child.stdin.take().context("oracle without stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("oracle without stdout")?);
        // One directory per oracle: several may run in one process (parallel tests).
        static ORACLES: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "grouper-difftest-{}-{}",
            std::process::id(),
            ORACLES.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)?;
        let mut oracle = Self {
            child,
            stdin,
            stdout,
            dir,
            files: 0,
            version: String::new(),
        };
        let hello = oracle.read_line().context(
            "the DuckDB oracle did not start (is duckdb installed? run scripts/setup-venv.sh)",
        )?;
        oracle.version = hello["version"].as_str().unwrap_or("?").to_string();
        Ok(oracle)
    }

    fn read_line(&mut self) -> Result<Json> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            bail!("the DuckDB oracle exited");
        }
        serde_json::from_str(&line).context("the DuckDB oracle answered no JSON")
    }

    /// Writes `table` as Parquet for the queries that follow; returns its path.
    pub fn load(&mut self, table: &Table) -> Result<PathBuf> {
        self.files += 1;
        let path = self.dir.join(format!("t{}.parquet", self.files));
        let batch = table.batch()?;
        let mut w = ArrowWriter::try_new(std::fs::File::create(&path)?, batch.schema(), None)?;
        w.write(&batch)?;
        w.close()?;
        Ok(path)
    }

    /// DuckDB's answer to `sql` over the table at `path`.
    pub fn query(&mut self, path: &Path, sql: &str) -> Result<Answer> {
        let req = serde_json::json!({ "parquet": path.to_string_lossy(), "sql": sql });
        writeln!(self.stdin, "{req}")?;
        self.stdin.flush()?;
        let out = self.read_line()?;
        if out["ok"].as_bool() != Some(true) {
            return Ok(Err(out["error"].as_str().unwrap_or("?").to_string()));
        }
        let rows = out["rows"]
            .as_array()
            .ok_or_else(|| anyhow!("oracle: no rows"))?
            .iter()
            .map(|r| {
                r.as_array()
                    .ok_or_else(|| anyhow!("oracle: a row is not a list"))?
                    .iter()
                    .map(decode)
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Ok(rows))
    }

    /// Removes the data file of a finished case.
    pub fn unload(&self, path: &Path) {
        let _ = std::fs::remove_file(path);
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One tagged value of the oracle's JSON.
fn decode(v: &Json) -> Result<Value> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let obj = v
        .as_object()
        .ok_or_else(|| anyhow!("oracle: bad value {v}"))?;
    let (tag, x) = obj
        .iter()
        .next()
        .ok_or_else(|| anyhow!("oracle: empty value"))?;
    let text = || x.as_str().ok_or_else(|| anyhow!("oracle: bad value {v}"));
    Ok(match tag.as_str() {
        "i" => Value::Int(
            text()?
                .parse()
                .map_err(|_| anyhow!("oracle: bad integer {v}"))?,
        ),
        "d" => parse_decimal(text()?).map_err(|e| anyhow!(e))?,
        "f" => Value::Float(parse_float(text()?).map_err(|e| anyhow!(e))?),
        "s" => Value::Str(text()?.to_string()),
        "b" => Value::Bool(x.as_bool().ok_or_else(|| anyhow!("oracle: bad bool {v}"))?),
        "t" => Value::Date(
            x.as_i64()
                .and_then(|d| i32::try_from(d).ok())
                .ok_or_else(|| anyhow!("oracle: bad date {v}"))?,
        ),
        _ => bail!("oracle: unknown tag in {v}"),
    })
}

/// The Python to run the oracle with: `$GROUPER_PYTHON`, else the project's `.venv`.
pub fn python(root: &Path) -> PathBuf {
    std::env::var_os("GROUPER_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".venv/bin/python"))
}
