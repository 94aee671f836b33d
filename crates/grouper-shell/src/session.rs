//! The shell's session: one DataFusion context with grouper installed, kept across statements
//! so that tables (and the GPU's prepared inputs of in-memory ones) stay warm, and the shell's
//! settings. Scripts and the prompt both run through [`Shell::run_text`].

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::SessionContext;
use grouper::GrouperConfig;

use crate::dot::{self, Dot};
use crate::output::{self, Format};
use crate::statements::{split, Piece};
use crate::{explain, progress, tables};

/// Whether the shell goes on after a piece of input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Read on.
    Continue,
    /// `.quit`.
    Quit,
}

/// A statement cancelled with Ctrl-C.
#[derive(Debug)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cancelled")
    }
}

impl std::error::Error for Cancelled {}

/// The shell's settings (dot-commands change them).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// How results print.
    pub mode: Format,
    /// Print each statement's time.
    pub timer: bool,
    /// Print each query's plan with its metrics.
    pub explain: bool,
    /// At the prompt: Ctrl-C cancels the running statement (scripts leave Ctrl-C to end the
    /// process), and a spinner shows on stderr (a terminal) once a statement runs past half a
    /// second.
    pub prompt: bool,
    /// Run the queries that follow one another as one batch, the CPU and the GPU taking
    /// different queries at the same time ([`crate::batch`]).
    pub coprocess: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mode: Format::Table,
            timer: false,
            explain: false,
            prompt: false,
            coprocess: false,
        }
    }
}

/// One shell session.
pub struct Shell {
    ctx: SessionContext,
    config: GrouperConfig,
    /// The shell's settings.
    pub settings: Settings,
    /// How deep `.read` has nested (a file reading itself stops at [`MOST_READS`]).
    reads: usize,
    /// Whether a co-processed batch already said it found no GPU.
    told_no_gpu: bool,
}

/// The deepest `.read` nesting.
const MOST_READS: usize = 16;

impl Shell {
    /// A session configured by `config`.
    pub fn new(config: GrouperConfig) -> Result<Shell> {
        Ok(Shell {
            ctx: grouper::session_context(&config)?,
            config,
            settings: Settings::default(),
            reads: 0,
            told_no_gpu: false,
        })
    }

    /// Registers `NAME=PATH` tables.
    pub async fn register(&self, specs: &[String]) -> Result<()> {
        tables::register_tables(&self.ctx, specs).await
    }

    /// Runs every statement and dot-command in `text`, SQL left unended by `;` included. With
    /// `stop_on_error` (scripts) the first error ends the run and is returned; otherwise (the
    /// prompt) each error is printed on stderr and the rest still runs.
    pub async fn run_text(&mut self, text: &str, stop_on_error: bool) -> Result<Flow> {
        let (mut pieces, rest) = split(text);
        if !rest.is_empty() {
            pieces.push(Piece::Sql(rest));
        }
        // Queries waiting to run as one co-processed batch.
        let mut batch = Vec::new();
        for piece in pieces {
            if let Piece::Sql(sql) = &piece {
                if self.settings.coprocess && crate::batch::is_query(sql) {
                    batch.push(sql.clone());
                    continue;
                }
            }
            if !batch.is_empty() {
                let done = self.run_batch(std::mem::take(&mut batch)).await;
                handled(done.map(|()| Flow::Continue), stop_on_error)?;
            }
            let done = match &piece {
                Piece::Sql(sql) => self.run_sql(sql).await.map(|()| Flow::Continue),
                Piece::Dot(line) => self.run_dot(line).await,
            };
            if handled(done, stop_on_error)? == Flow::Quit {
                return Ok(Flow::Quit);
            }
        }
        if !batch.is_empty() {
            let done = self.run_batch(batch).await;
            handled(done.map(|()| Flow::Continue), stop_on_error)?;
        }
        Ok(Flow::Continue)
    }

    /// Plans and runs one SQL statement, printing its result.
    async fn run_sql(&mut self, sql: &str) -> Result<()> {
        let start = Instant::now();
        let spinner = self.settings.prompt.then(|| {
            progress::delayed_spinner("running (Ctrl-C cancels)", Duration::from_millis(500))
        });
        let work = run_sql(&self.ctx, sql, false);
        let result = if self.settings.prompt {
            tokio::select! {
                r = work => r,
                _ = tokio::signal::ctrl_c() => Err(Cancelled.into()),
            }
        } else {
            work.await
        };
        drop(spinner);
        let (plan, batches, timing) = result?;
        let elapsed = start.elapsed();
        let threads = self.ctx.state().config().target_partitions();
        if self.settings.explain {
            print!(
                "{}",
                explain::explain(&plan, &grouper::harm::take_kept(&self.ctx))
            );
        }
        if !plan.schema().fields().is_empty() {
            output::write(&batches, self.settings.mode, None, threads)?;
        }
        if self.settings.timer {
            println!(
                "Run Time: {:.3} s (planning {:.3} s; aggregation: {})",
                elapsed.as_secs_f64(),
                timing.plan.as_secs_f64(),
                explain::where_it_ran(&plan)
            );
        }
        std::io::stdout().flush()?;
        Ok(())
    }

    /// Runs one dot-command.
    async fn run_dot(&mut self, line: &str) -> Result<Flow> {
        let command = dot::parse(line).map_err(anyhow::Error::msg)?;
        match command {
            Dot::Tables => {
                for name in self.table_names() {
                    println!("{name}");
                }
            }
            Dot::Schema(table) => {
                let names = match table {
                    Some(t) => vec![t],
                    None => self.table_names(),
                };
                for name in names {
                    let provider = self
                        .ctx
                        .table_provider(name.as_str())
                        .await
                        .with_context(|| format!("no table '{name}'"))?;
                    println!("{}", describe(&name, provider.as_ref()));
                }
            }
            Dot::Timer(on) => self.settings.timer = on,
            Dot::Mode(mode) => self.settings.mode = mode,
            Dot::Explain(on) => self.settings.explain = on,
            Dot::Backend(backend) => self.set_backend(backend).await?,
            Dot::Coprocess(on) => self.settings.coprocess = on,
            Dot::Read(path) => {
                if self.reads >= MOST_READS {
                    anyhow::bail!(".read nested {MOST_READS} deep (does a file read itself?)");
                }
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                self.reads += 1;
                let flow = Box::pin(self.run_text(&text, true)).await;
                self.reads -= 1;
                return flow.with_context(|| format!("in {}", path.display()));
            }
            Dot::Help => println!("{}", dot::HELP),
            Dot::Quit => return Ok(Flow::Quit),
        }
        Ok(Flow::Continue)
    }

    /// The tables of the default schema, sorted.
    fn table_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .ctx
            .catalog("datafusion")
            .and_then(|c| c.schema("public"))
            .map(|s| s.table_names())
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Runs `queries` as one co-processed batch ([`crate::batch`]): on a session over the
    /// same tables aggregating on the CPU and one on the GPU, or without a GPU (said once) on
    /// the CPU alone.
    async fn run_batch(&mut self, queries: Vec<String>) -> Result<()> {
        let cpu = self.context_with(grouper::Backend::Cpu).await?;
        let gpu = match self.context_with(grouper::Backend::Gpu).await {
            Ok(ctx) => Some(ctx),
            Err(e) => {
                if !self.told_no_gpu {
                    eprintln!(
                        "note: {}: the batch runs on the CPU",
                        crate::one_line(&e).trim_start_matches("Error during planning: ")
                    );
                    self.told_no_gpu = true;
                }
                None
            }
        };
        let s = self.settings;
        let work = crate::batch::run(&cpu, gpu.as_ref(), &queries, s.mode, s.timer, s.explain);
        // At the prompt Ctrl-C cancels the batch, as it cancels a statement.
        if s.prompt {
            tokio::select! {
                r = work => r,
                _ = tokio::signal::ctrl_c() => Err(Cancelled.into()),
            }
        } else {
            work.await
        }
    }

    /// Switches the aggregating engine: a new context with the new backend, holding the same
    /// tables (the same providers, so in-memory tables keep their arrays, and with them the
    /// GPU's prepared inputs). Settings made with SQL `SET` start again from the defaults.
    async fn set_backend(&mut self, backend: grouper::Backend) -> Result<()> {
        self.ctx = self.context_with(backend).await?;
        self.config.backend = backend;
        Ok(())
    }

    /// A context like the session's but aggregating with `backend`, holding the same tables
    /// (the same providers, so in-memory tables keep their arrays, and with them the GPU's
    /// prepared inputs).
    async fn context_with(&self, backend: grouper::Backend) -> Result<SessionContext> {
        let config = GrouperConfig {
            backend,
            ..self.config.clone()
        };
        let ctx = grouper::session_context(&config)?;
        for name in self.table_names() {
            let provider = self.ctx.table_provider(name.as_str()).await?;
            ctx.register_table(name.as_str(), provider)?;
        }
        Ok(ctx)
    }
}

/// What [`Shell::run_text`] does with one step's outcome: an error ends a script (it is
/// returned) and is printed at the prompt, which goes on.
fn handled(done: Result<Flow>, stop_on_error: bool) -> Result<Flow> {
    match done {
        Err(e) if stop_on_error => Err(e),
        Err(e) => {
            eprintln!("error: {}", crate::one_line(&e));
            Ok(Flow::Continue)
        }
        flow => flow,
    }
}

/// Times of the phases of one statement.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Parsing and planning (DDL, such as `CREATE TABLE ... AS`, runs here).
    pub plan: Duration,
    /// Running the plan to its last batch.
    pub execute: Duration,
    /// CPU time of grouper's aggregation, over all workers.
    pub aggregate: Duration,
}

/// Plans and runs `sql`: its plan (for `--explain`), its result (at least one batch, empty
/// where there are no rows: a CSV header, a Parquet schema) and its timing; with `spinner`, a
/// spinner on stderr (a terminal) while it runs.
pub async fn run_sql(
    ctx: &SessionContext,
    sql: &str,
    spinner: bool,
) -> Result<(Arc<dyn ExecutionPlan>, Vec<RecordBatch>, Timing)> {
    let t0 = Instant::now();
    let df = ctx.sql(sql).await.map_err(tables::missing_file)?;
    let plan = df.create_physical_plan().await?;
    let plan_time = t0.elapsed();
    grouper_core::trace::event(|| "planned".into());
    let bar = spinner.then(|| progress::spinner("running query"));
    let t1 = Instant::now();
    let mut batches = collect(Arc::clone(&plan), ctx.task_ctx()).await?;
    if batches.is_empty() {
        batches.push(RecordBatch::new_empty(plan.schema()));
    }
    let execute = t1.elapsed();
    grouper_core::trace::event(|| "executed".into());
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let aggregate = explain::aggregate_time(&plan);
    let timing = Timing {
        plan: plan_time,
        execute,
        aggregate,
    };
    Ok((plan, batches, timing))
}

/// A table's columns as a `CREATE TABLE` line, with Arrow's type names.
fn describe(name: &str, table: &dyn TableProvider) -> String {
    let columns: Vec<String> = table
        .schema()
        .fields()
        .iter()
        .map(|f| {
            let null = if f.is_nullable() { "" } else { " NOT NULL" };
            format!("{} {}{null}", f.name(), f.data_type())
        })
        .collect();
    format!("CREATE TABLE {name}({});", columns.join(", "))
}
