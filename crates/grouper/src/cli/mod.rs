//! Command-line arguments (defined once here, with their docs) and the commands.

mod output;
pub mod progress;
mod query;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use grouper::Backend;
use grouper_core::cpu::Strategy;
use grouper_core::hash::HashFn;
use grouper_core::planner::Overrides;

pub use output::Format;

/// grouper: GROUP BY aggregation on CPUs (and soon GPUs), inside Apache DataFusion.
#[derive(Parser, Debug)]
#[command(name = "grouper", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run SQL over Parquet/CSV/JSON/Arrow files: FROM 'data/*.parquet' or --table name=path.
    Query(QueryArgs),
    /// Generate TPC-H lineitem in memory and run TPC-H Q1.
    Demo(DemoArgs),
    /// Generate data files.
    #[command(subcommand)]
    Gen(GenCommand),
    /// Benchmarks: sweeps against DataFusion and DuckDB, JSON to bench/results/.
    #[command(subcommand)]
    Bench(crate::bench::BenchCommand),
}

/// Engine options shared by every command that runs queries.
#[derive(Args, Debug, Clone)]
pub struct EngineArgs {
    /// Which engine aggregates: auto, cpu, gpu, hybrid, or datafusion (DataFusion's own).
    #[arg(long, default_value = "auto")]
    pub backend: Backend,
    /// Force a strategy: perfect, thread_local, shared or sort (default: the planner chooses).
    #[arg(long)]
    pub strategy: Option<Strategy>,
    /// Force a hash function: murmur3, multiply_shift, fnv1a or identity.
    #[arg(long)]
    pub hash: Option<HashFn>,
    /// Hash-table fill factor in (0, 0.95].
    #[arg(long)]
    pub fill_factor: Option<f64>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl EngineArgs {
    /// The session configuration these options describe.
    pub fn config(&self) -> grouper::GrouperConfig {
        grouper::GrouperConfig {
            backend: self.backend,
            overrides: Overrides {
                strategy: self.strategy,
                hash: self.hash,
                fill_factor: self.fill_factor,
                initial_groups: None,
            },
            threads: self.threads,
        }
    }
}

#[derive(Args, Debug)]
pub struct QueryArgs {
    /// The SQL query.
    pub sql: String,
    /// Register a table: NAME=PATH (a file, a directory or a glob; format from the extension).
    #[arg(long = "table", value_name = "NAME=PATH")]
    pub tables: Vec<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write the result to a file instead of standard output.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Run the query and print the physical plan with grouper's estimate, choice and reason.
    #[arg(long)]
    pub explain: bool,
    /// Print plan/scan/aggregate/output times on stderr.
    #[arg(long)]
    pub timing: bool,
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// TPC-H scale factor.
    #[arg(long, default_value_t = 1.0)]
    pub sf: f64,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Print the physical plan with grouper's choice.
    #[arg(long)]
    pub explain: bool,
}

#[derive(Subcommand, Debug)]
enum GenCommand {
    /// TPC-H lineitem as Parquet files in DIR.
    Tpch {
        /// Scale factor.
        #[arg(long, default_value_t = 1.0)]
        sf: f64,
        /// Output directory.
        #[arg(short = 'o', long)]
        output: PathBuf,
    },
    /// A synthetic table (k, v) as Parquet, CSV or Arrow IPC (by extension).
    Synthetic {
        /// Rows.
        #[arg(long)]
        rows: usize,
        /// Distinct groups.
        #[arg(long)]
        groups: u64,
        /// Key distribution: uniform, zipf, heavy_hitter or sequential.
        #[arg(long, default_value = "uniform")]
        dist: String,
        /// Zipf exponent.
        #[arg(long, default_value_t = 1.1)]
        zipf_s: f64,
        /// Key type: i32, i64 or str.
        #[arg(long, default_value = "i64")]
        key_type: grouper::synthetic::KeyType,
        /// Fraction of NULL keys (and, independently, NULL values).
        #[arg(long, default_value_t = 0.0)]
        null_frac: f64,
        /// Random seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Output file.
        #[arg(short = 'o', long)]
        output: PathBuf,
    },
}

/// Parses arguments and runs the command.
pub fn run() -> Result<()> {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            // clap's message spans lines; keep the one that says what is wrong.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            anyhow::bail!("{}", first.trim_start_matches("error: "));
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.command {
        Command::Query(a) => rt.block_on(query::query(a)),
        Command::Demo(a) => rt.block_on(query::demo(a)),
        Command::Gen(GenCommand::Tpch { sf, output }) => rt.block_on(query::gen_tpch(sf, &output)),
        Command::Gen(GenCommand::Synthetic {
            rows,
            groups,
            dist,
            zipf_s,
            key_type,
            null_frac,
            seed,
            output,
        }) => {
            let spec = grouper::synthetic::Spec {
                rows,
                groups,
                dist: grouper::synthetic::Dist::parse(&dist, zipf_s)?,
                key_type,
                null_frac,
                seed,
            };
            query::gen_synthetic(&spec, &output)
        }
        Command::Bench(b) => rt.block_on(crate::bench::run(b)),
    }
}
