//! Command-line arguments (defined once here, with their docs) and the commands.

mod difftest;
mod query;
mod serve;
mod shell;
mod worker;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use grouper::Backend;
use grouper::Split;
use grouper_core::cpu::Strategy;
use grouper_core::hash::HashFn;
use grouper_core::planner::Overrides;
use grouper_core::table::BucketMap;
use grouper_core::tune::Hyper;
use grouper_gpu::{GpuOptions, GpuParams, GpuStrategy, Probing};

pub use grouper_shell::output::Format;

/// grouper: GROUP BY aggregation on CPUs and NVIDIA GPUs, inside Apache DataFusion.
/// Without a command, an interactive SQL shell (or the script of -c, -f or standard input).
#[derive(Parser, Debug)]
#[command(
    name = "grouper",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    shell: ShellArgs,
}

/// The shell's options (`grouper` without a command).
#[derive(Args, Debug)]
pub struct ShellArgs {
    /// Run these SQL statements (ended by ';') and dot-commands, then exit.
    #[arg(short = 'c', long = "command", value_name = "SQL")]
    pub command: Option<String>,
    /// Run the statements in FILE, then exit.
    #[arg(
        short = 'f',
        long = "file",
        value_name = "FILE",
        conflicts_with = "command"
    )]
    pub file: Option<PathBuf>,
    /// Register a table: NAME=PATH (a file, a directory or a glob; format from the extension).
    #[arg(long = "table", value_name = "NAME=PATH")]
    pub tables: Vec<String>,
    /// How results print (.mode changes it): table, csv or json.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Run the queries that follow one another as one batch, the CPU and the GPU taking
    /// different queries at the same time, costliest on the GPU (.coprocess changes it).
    #[arg(long)]
    pub coprocess: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run SQL over Parquet/CSV/JSON/Arrow files: FROM 'data/*.parquet' or --table name=path.
    Query(QueryArgs),
    /// Serve SQL to Flight SQL clients (ADBC, JDBC, pyarrow) over one session whose tables
    /// stay in memory across queries.
    Serve(serve::ServeArgs),
    /// Serve as a worker of distributed queries (datafusion-distributed): a coordinator,
    /// `grouper query --workers`, sends it stages to run with grouper's engine.
    Worker(worker::WorkerArgs),
    /// Generate TPC-H lineitem in memory and run TPC-H Q1.
    Demo(DemoArgs),
    /// Generate data files.
    #[command(subcommand)]
    Gen(GenCommand),
    /// Benchmarks: sweeps against DataFusion and DuckDB, JSON to bench/results/.
    #[command(subcommand)]
    Bench(crate::bench::BenchCommand),
    /// List the GPUs grouper can use, with their properties, or say why there are none.
    Devices,
    /// Measure every strategy on this machine's GPU and CPU and store the device profile
    /// (fastest strategy per key kind and group count) that sessions then plan from.
    Calibrate(crate::calibrate::CalibrateArgs),
    /// Differential testing: random cases on every backend and strategy against DuckDB.
    Difftest(difftest::DifftestArgs),
}

/// Engine options shared by every command that runs queries.
#[derive(Args, Debug, Clone)]
pub struct EngineArgs {
    /// Which engine aggregates: auto, cpu, gpu, hybrid, or datafusion (DataFusion's own).
    #[arg(long, default_value = "auto")]
    pub backend: Backend,
    /// Force a strategy. CPU: perfect, thread_local, shared, sort, partitioned. GPU: perfect_registers,
    /// perfect_shared, perfect_global, block_local, thread_private, global (implies the GPU
    /// backend under auto). Default: the planner chooses.
    #[arg(long)]
    pub strategy: Option<StrategyArg>,
    /// Force a hash function: murmur3, multiply_shift (multiply_shift:random for a random odd
    /// multiplier, multiply_shift:0x... for a given one), fnv1a or identity.
    #[arg(long)]
    pub hash: Option<HashFn>,
    /// Hashing scheme: linear, chained, chained_plus, cuckoo2 or cuckoo4. On the CPU, of the
    /// private tables (thread_local, perfect past its domain); on the GPU, chained and
    /// chained_plus chain the device-memory table every strategy shares, and cuckoo2 and cuckoo4
    /// index thread_private's per-thread tables (that strategy only).
    #[arg(long)]
    pub probing: Option<Probing>,
    /// How hashes pick a bucket: high_bits (power-of-two tables) or modulo (tables of any size,
    /// as Karnagel's). On the CPU, of the private tables; on the GPU, of the device-memory table
    /// every strategy shares.
    #[arg(long)]
    pub bucket_map: Option<BucketMap>,
    /// Hash-table fill factor in (0, 0.95].
    #[arg(long)]
    pub fill_factor: Option<f64>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// `auto`: replace every aggregation grouper handles, never leaving one to DataFusion's
    /// own where grouper's CPU would not beat it (by default `--explain` lists those it left).
    #[arg(long)]
    pub grouper_only: bool,
    /// GPU: upload the input once and time the query on device memory.
    #[arg(long)]
    pub resident: bool,
    /// GPU: rows per copied batch (lowered to fit --gpu-memory-limit).
    #[arg(long, default_value_t = 1 << 22)]
    pub batch_rows: usize,
    /// GPU: how columns cross PCIe: `compressed` (bit-packed, frame-of-reference or
    /// dictionary per column, decoded in the kernel) or `raw` (as they are).
    #[arg(long, default_value = "compressed")]
    pub transfer: TransferArg,
    /// GPU: the kernel reads chunks from mapped pinned host memory (no copy) instead of
    /// copying them to the device first.
    #[arg(long)]
    pub zero_copy: bool,
    /// GPU: read Parquet files through DataFusion's scan (decoded on the CPU) instead of
    /// sending their pages, still encoded, to the GPU to decode.
    #[arg(long)]
    pub no_gpu_pages: bool,
    /// GPU: evaluate the filter on the CPU and send one selection bit per row instead of the
    /// columns only the filter reads (filter precomputation).
    #[arg(long)]
    pub cpu_filter: bool,
    /// GPU: most device memory a query may take, e.g. 2G; inputs larger than it stream
    /// through in smaller chunks.
    #[arg(long, value_parser = parse_bytes)]
    pub gpu_memory_limit: Option<usize>,
    /// GPU: host memory for prepared inputs (encoded chunk images kept pinned between
    /// queries over the same in-memory table), e.g. 8G; 0 turns the cache off.
    #[arg(long, value_parser = parse_bytes_or_zero, default_value = "16G")]
    pub gpu_cache: usize,
    /// GPU: blocks per multiprocessor (default: from occupancy).
    #[arg(long)]
    pub blocks_per_sm: Option<u32>,
    /// GPU: threads per block (default: 256, larger for large shared-memory tables).
    #[arg(long)]
    pub threads_per_block: Option<u32>,
    /// GPU: rows per thread per loop step (where the runtime tuner starts).
    #[arg(long, default_value_t = GpuParams::default().items_per_thread)]
    pub items_per_thread: u32,
    /// GPU: the runtime tuner (Rosenfeld's Algorithm 1) searches blocks per multiprocessor,
    /// threads per block and items per thread between chunks, and the strategy among those of
    /// the planned table kind, unless --blocks-per-sm or --threads-per-block fix the shape.
    /// Each shape it reaches compiles once (then comes from the kernel cache).
    #[arg(long)]
    pub tune: bool,
    /// Plan from the rules alone: ignore this machine's device profile (`grouper calibrate`).
    #[arg(long)]
    pub no_profile: bool,
    /// `--backend hybrid`: give the CPU this fixed share (0 to 1) of the input's chunks
    /// instead of dividing them by the two sides' measured speeds (for comparisons).
    #[arg(long, value_parser = <Split as std::str::FromStr>::from_str)]
    pub hybrid_cpu_share: Option<Split>,
    /// Memory budget for the query, e.g. 512M or 4G: aggregation state and DataFusion's
    /// operators share it; aggregations and sorts past it spill to temporary files, and what
    /// cannot spill fails with a clear error. Files are then read rather than mapped, and freed
    /// memory goes back to the system at once; peak RSS passes the budget by the margin the
    /// README measures.
    #[arg(long, value_parser = parse_bytes)]
    pub memory_limit: Option<usize>,
}

/// How GPU input crosses PCIe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TransferArg {
    /// Transfer compression (Tomé Table 1).
    Compressed,
    /// The columns as they are.
    Raw,
}

/// Like [`parse_bytes`], also accepting 0.
fn parse_bytes_or_zero(s: &str) -> std::result::Result<usize, String> {
    if s.trim() == "0" {
        return Ok(0);
    }
    parse_bytes(s)
}

/// `123`, `64K`, `512M`, `4G` (powers of 1024) as bytes.
fn parse_bytes(s: &str) -> std::result::Result<usize, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("invalid size '{s}' (use e.g. 512M or 4G)")),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("invalid size '{s}' (use e.g. 512M or 4G)"))?;
    let bytes = n * mult as f64;
    if !(bytes.is_finite() && bytes >= 1.0 && bytes < usize::MAX as f64) {
        return Err(format!("invalid size '{s}' (use e.g. 512M or 4G)"));
    }
    Ok(bytes as usize)
}

/// A CPU or a GPU strategy name.
#[derive(Debug, Clone, Copy)]
pub enum StrategyArg {
    /// A CPU strategy.
    Cpu(Strategy),
    /// A GPU strategy.
    Gpu(GpuStrategy),
}

impl std::str::FromStr for StrategyArg {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if let Ok(c) = s.parse::<Strategy>() {
            return Ok(StrategyArg::Cpu(c));
        }
        s.parse::<GpuStrategy>().map(StrategyArg::Gpu).map_err(|_| {
            format!(
                "unknown strategy '{s}' (CPU: {}; GPU: {})",
                Strategy::ALL.map(|c| c.name()).join(", "),
                GpuStrategy::ALL.map(|g| g.name()).join(", ")
            )
        })
    }
}

impl EngineArgs {
    /// The session configuration these options describe.
    pub fn config(&self) -> grouper::GrouperConfig {
        let (cpu, gpu) = match self.strategy {
            Some(StrategyArg::Cpu(c)) => (Some(c), None),
            Some(StrategyArg::Gpu(g)) => (None, Some(g)),
            None => (None, None),
        };
        let defaults = GpuParams::default();
        grouper::GrouperConfig {
            // A GPU strategy under `auto` runs on the GPU and falls back to the CPU if the GPU
            // fails; `--backend gpu` makes a GPU failure an error.
            backend: self.backend,
            overrides: Overrides {
                strategy: cpu,
                hash: self.hash,
                fill_factor: self.fill_factor,
                probing: self.probing,
                buckets: self.bucket_map,
                ..Overrides::default()
            },
            gpu: GpuOptions {
                strategy: gpu,
                params: GpuParams {
                    blocks_per_sm: self.blocks_per_sm,
                    threads_per_block: self.threads_per_block,
                    items_per_thread: self.items_per_thread,
                    fill_factor: self.fill_factor.unwrap_or(defaults.fill_factor),
                    hash: self.hash.unwrap_or(defaults.hash),
                    probing: self.probing.unwrap_or(defaults.probing),
                    buckets: self.bucket_map.unwrap_or(defaults.buckets),
                    initial_groups: None,
                    key_ranges: None,
                },
                resident: self.resident,
                batch_rows: self.batch_rows,
                compress: self.transfer == TransferArg::Compressed,
                zero_copy: self.zero_copy,
                pages: !self.no_gpu_pages,
                memory_limit: self.gpu_memory_limit.map(|b| b as u64),
                cache_bytes: self.gpu_cache as u64,
                cpu_filter: self.cpu_filter,
                tune: self.tune.then(Hyper::default),
                profile: None,
            },
            threads: self.threads,
            memory_limit: self.memory_limit,
            no_profile: self.no_profile,
            hybrid_split: self.hybrid_cpu_share.unwrap_or_default(),
            pool: None,
            grouper_only: self.grouper_only,
            distributed: false,
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
    /// Run on these workers (`grouper worker`), e.g. http://host1:50061,http://host2:50061:
    /// this process plans and coordinates (datafusion-distributed), the workers aggregate
    /// their shares of the files and merge the groups after the shuffle. Every worker must
    /// read the files at the same paths.
    #[arg(long, value_delimiter = ',', value_name = "URL")]
    pub workers: Vec<String>,
    /// With --workers: bytes of files one scan task reads, e.g. 64M (default 16M); smaller
    /// spreads small inputs over more workers.
    #[arg(long, value_parser = parse_bytes)]
    pub bytes_per_task: Option<usize>,
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
    /// Run Q1 this many more times on the same table after the first (warm runs: the data
    /// generated once, buffers already faulted in) and report each time and their median.
    #[arg(long, default_value_t = 0)]
    pub reps: usize,
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
    /// The db-benchmark group-by table (G1: id1-id6, v1-v3, by the suite's rules) as Parquet,
    /// CSV or Arrow IPC (by extension).
    Groupby {
        /// Rows (the suite's N: 1e7, 1e8, 1e9).
        #[arg(long)]
        rows: f64,
        /// Groups of the large-group keys (the suite's K).
        #[arg(long, default_value_t = 100)]
        k: u32,
        /// Percent of NULLs in each column (the suite's nas).
        #[arg(long, default_value_t = 0)]
        nas: u32,
        /// Random seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Output file.
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
        /// Key distribution: uniform, zipf[:S], heavy_hitter[:F] (default 90% of the rows in
        /// one group), sequential, random (scattered keys), exponential, weibull[:A] or normal.
        #[arg(long, default_value = "uniform")]
        dist: String,
        /// Zipf exponent of a bare `--dist zipf`.
        #[arg(long, default_value_t = 1.1)]
        zipf_s: f64,
        /// Key type: i32, i64 or str.
        #[arg(long, default_value = "i64")]
        key_type: crate::synthetic::KeyType,
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
    // Ctrl-C ends a command at once: nothing is written by then (results are written after
    // the query completes), and the process exits with 130 as shells expect. At the shell's
    // prompt it cancels the running statement instead (grouper_shell::session); the server
    // shuts down gracefully (serve.rs).
    let own_ctrl_c = match &cli.command {
        Some(Command::Serve(_) | Command::Worker(_)) => true,
        Some(_) => false,
        None => shell::interactive(&cli.shell),
    };
    if !own_ctrl_c {
        rt.spawn(async {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("error: interrupted");
                std::process::exit(130);
            }
        });
    }
    let Some(command) = cli.command else {
        return shell::run(cli.shell, &rt);
    };
    match command {
        Command::Devices => devices(),
        Command::Difftest(a) => difftest::run(a),
        Command::Query(a) => rt.block_on(query::query(a)),
        Command::Serve(a) => serve::run(a, &rt),
        Command::Worker(a) => worker::run(a, &rt),
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
            let spec = crate::synthetic::Spec {
                rows,
                groups,
                dist: crate::synthetic::Dist::parse(&dist, zipf_s)?,
                key_type,
                null_frac,
                seed,
            };
            query::gen_synthetic(&spec, &output)
        }
        Command::Gen(GenCommand::Groupby {
            rows,
            k,
            nas,
            seed,
            output,
        }) => {
            if !(rows >= 1.0 && rows <= usize::MAX as f64) {
                anyhow::bail!("--rows must be a positive number of rows, not {rows}");
            }
            let spec = crate::groupby_data::Spec {
                rows: rows as usize,
                k,
                nas,
                seed,
            };
            query::gen_groupby(&spec, &output)
        }
        Command::Bench(b) => rt.block_on(crate::bench::run(b)),
        Command::Calibrate(c) => rt.block_on(crate::calibrate::calibrate(c)),
    }
}

/// `grouper devices`.
fn devices() -> Result<()> {
    match grouper_gpu::device::list() {
        Ok(list) => {
            for d in list {
                println!(
                    "GPU {}: {} | compute capability {}.{} ({}) | {} SMs | L2 {} MiB | shared memory {} KiB per block, {} KiB per SM | {:.1} GiB | driver {}.{}",
                    d.ordinal,
                    d.name,
                    d.compute_capability.0,
                    d.compute_capability.1,
                    d.arch(),
                    d.sms,
                    d.l2_bytes >> 20,
                    d.shared_per_block >> 10,
                    d.shared_per_sm >> 10,
                    d.memory_bytes as f64 / (1u64 << 30) as f64,
                    d.driver_version / 1000,
                    (d.driver_version % 1000) / 10
                );
            }
            Ok(())
        }
        Err(e) => {
            println!(
                "no GPU: {}",
                e.to_string().trim_start_matches("no GPU available: ")
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--strategy` takes CPU and GPU names alike, CPU first: a GPU strategy named like a CPU
    /// one could not be chosen (the GPU's partitioned aggregation is `hash_partitioned`, the
    /// CPU's `partitioned`).
    #[test]
    fn every_strategy_name_means_one_strategy() {
        for g in GpuStrategy::ALL {
            assert!(
                g.name().parse::<Strategy>().is_err(),
                "{g} is a CPU name too"
            );
            assert!(matches!(g.name().parse::<StrategyArg>(), Ok(StrategyArg::Gpu(s)) if s == g));
        }
        for c in Strategy::ALL {
            assert!(matches!(c.name().parse::<StrategyArg>(), Ok(StrategyArg::Cpu(s)) if s == c));
        }
    }
}
