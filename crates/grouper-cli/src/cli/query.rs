//! `grouper query`, `grouper demo` and `grouper gen`.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use arrow::array::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::{CsvReadOptions, JsonReadOptions, ParquetReadOptions, SessionContext};
use grouper::exec::GroupByExec;
use rayon::prelude::*;

use super::{output, progress, DemoArgs, QueryArgs};

/// Registers `NAME=PATH` tables, choosing the reader from the extension, each on a task of its
/// own: registering reads and parses a file's footer (1 MB for TPC-H SF 10's `lineitem`), and
/// one after another TPC-H's eight tables at SF 10 took the H200 host ~80 ms of a 300 ms Q1.
async fn register_tables(ctx: &SessionContext, tables: &[String]) -> Result<()> {
    let mut tasks = Vec::with_capacity(tables.len());
    for t in tables {
        let Some((name, path)) = t.split_once('=') else {
            bail!("--table expects NAME=PATH, got '{t}'");
        };
        let (ctx, name, path) = (ctx.clone(), name.to_string(), path.to_string());
        tasks.push(tokio::spawn(async move {
            register_table(&ctx, &name, &path)
                .await
                .with_context(|| format!("cannot register table '{name}' from {path}"))
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// Registers table `name` over `path`, its reader chosen by the extension.
async fn register_table(
    ctx: &SessionContext,
    name: &str,
    path: &str,
) -> datafusion::error::Result<()> {
    let lower = path.to_ascii_lowercase();
    if lower.ends_with(".csv") {
        ctx.register_csv(name, path, CsvReadOptions::new()).await
    } else if lower.ends_with(".json") || lower.ends_with(".ndjson") {
        ctx.register_json(name, path, JsonReadOptions::default())
            .await
    } else if lower.ends_with(".arrow") || lower.ends_with(".ipc") || lower.ends_with(".feather") {
        ctx.register_arrow(name, path, Default::default()).await
    } else {
        ctx.register_parquet(name, path, ParquetReadOptions::default())
            .await
    }
}

/// DataFusion reports a path in FROM that matches no file as an unknown table; say what it is.
fn missing_file(e: datafusion::error::DataFusionError) -> anyhow::Error {
    let text = e.to_string();
    let name = text
        .split("table '")
        .nth(1)
        .and_then(|r| r.split('\'').next())
        .map(|n| n.trim_start_matches("datafusion.public."));
    match name {
        Some(n) if n.contains(['/', '.', '*']) && !Path::new(n).exists() => anyhow::anyhow!(
            "no file matches '{n}' (a path or glob in FROM must name existing files)"
        ),
        _ => e.into(),
    }
}

/// Times of the phases of one query.
struct Timing {
    plan: Duration,
    execute: Duration,
    aggregate: Duration,
}

/// Plans and runs `sql`, returning the plan (for --explain), the result and the timing.
async fn run_sql(
    ctx: &SessionContext,
    sql: &str,
) -> Result<(Arc<dyn ExecutionPlan>, Vec<RecordBatch>, Timing)> {
    let t0 = Instant::now();
    let df = ctx.sql(sql).await.map_err(missing_file)?;
    let plan = df.create_physical_plan().await?;
    let plan_time = t0.elapsed();
    grouper_core::trace::event(|| "planned".into());
    let spinner = progress::spinner("running query");
    let t1 = Instant::now();
    let mut batches = collect(Arc::clone(&plan), ctx.task_ctx()).await?;
    if batches.is_empty() {
        // No rows: still a result with columns (a CSV header, a Parquet schema).
        batches.push(RecordBatch::new_empty(plan.schema()));
    }
    let execute = t1.elapsed();
    grouper_core::trace::event(|| "executed".into());
    spinner.finish_and_clear();
    let aggregate = aggregate_time(&plan);
    Ok((
        plan,
        batches,
        Timing {
            plan: plan_time,
            execute,
            aggregate,
        },
    ))
}

/// CPU time of the GroupByExec nodes in `plan`, summed over their workers.
fn aggregate_time(plan: &Arc<dyn ExecutionPlan>) -> Duration {
    let own = plan
        .downcast_ref::<GroupByExec>()
        .and_then(|g| g.metrics())
        .and_then(|m| m.elapsed_compute())
        .map_or(Duration::ZERO, |ns| Duration::from_nanos(ns as u64));
    own + plan
        .children()
        .into_iter()
        .map(aggregate_time)
        .sum::<Duration>()
}

fn uses_grouper(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.downcast_ref::<GroupByExec>().is_some() || plan.children().into_iter().any(uses_grouper)
}

/// Prints the plan with its metrics, and the aggregations `auto` left to DataFusion (`kept`).
fn print_explain(plan: &Arc<dyn ExecutionPlan>, kept: &[String]) {
    println!(
        "{}",
        datafusion::physical_plan::display::DisplayableExecutionPlan::with_metrics(plan.as_ref())
            .indent(true)
    );
    for kept in kept {
        println!("grouper left an aggregation to DataFusion's AggregateExec (auto; --grouper-only takes it): {kept}");
    }
    if !uses_grouper(plan) {
        println!("grouper: no GroupByExec in this plan (no aggregation, an unsupported aggregate or type, or --backend datafusion); DataFusion's operators ran.");
    }
}

pub async fn query(args: QueryArgs) -> Result<()> {
    let ctx = grouper::session_context(&args.engine.config())?;
    let threads = ctx.state().config().target_partitions();
    register_tables(&ctx, &args.tables).await?;
    grouper_core::trace::event(|| "session and tables ready".into());
    let (plan, batches, timing) = run_sql(&ctx, &args.sql).await?;
    if args.explain {
        print_explain(&plan, &grouper::harm::take_kept(&ctx));
    }
    let t = Instant::now();
    if !args.explain || args.output.is_some() {
        output::write(&batches, args.format, args.output.as_deref(), threads)?;
    }
    grouper_core::trace::event(|| "output written".into());
    if args.timing {
        eprintln!(
            "timing: plan {:.1} ms, execute {:.1} ms (scan, filter and aggregate overlap; grouper's aggregation used {:.1} ms of CPU over all workers), output {:.1} ms",
            ms(timing.plan),
            ms(timing.execute),
            ms(timing.aggregate),
            ms(t.elapsed())
        );
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub async fn demo(args: DemoArgs) -> Result<()> {
    let config = args.engine.config();
    let ctx = grouper::session_context(&config)?;
    let threads = ctx.state().config().target_partitions();
    let bar = progress::rows(crate::tpch::lineitem_rows(args.sf), "generating lineitem");
    let t = Instant::now();
    // Stored narrowed where grouper's CPU workers will read it: the GPU's prepared-input cache
    // knows a table by its arrays, which a narrowed table's widening makes anew each query.
    let narrow = match config.backend {
        grouper::Backend::Cpu => true,
        grouper::Backend::Auto => grouper_gpu::device::installed_driver().is_none(),
        _ => false,
    };
    let table = crate::tpch::lineitem_table(args.sf, threads, narrow, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    eprintln!(
        "generated TPC-H lineitem SF {} in memory in {:.1} s ({} threads)",
        args.sf,
        t.elapsed().as_secs_f64(),
        threads
    );
    ctx.register_table("lineitem", table)?;
    let (plan, batches, timing) = run_sql(&ctx, crate::tpch::Q1).await?;
    let kept = grouper::harm::take_kept(&ctx);
    if args.explain {
        print_explain(&plan, &kept);
    }
    output::write(&batches, output::Format::Table, None, threads)?;
    let engine = match config.backend {
        grouper::Backend::DataFusion => "DataFusion's aggregation".to_string(),
        b => match kept.first() {
            Some(why) if !uses_grouper(&plan) => format!(
                "DataFusion's aggregation ({b} backend left it there: {why}; --grouper-only or --backend cpu runs grouper's)"
            ),
            _ => format!("grouper ({b} backend: {})", where_it_ran(&plan)),
        },
    };
    println!(
        "TPC-H Q1 at SF {} with {engine}: {:.1} ms (planning {:.1} ms; aggregation CPU time {:.1} ms over all workers)",
        args.sf,
        ms(timing.execute),
        ms(timing.plan),
        ms(timing.aggregate)
    );
    if args.reps > 0 {
        let (mut warm, mut cpu) = (Vec::with_capacity(args.reps), Vec::with_capacity(args.reps));
        for _ in 0..args.reps {
            let timing = run_sql(&ctx, crate::tpch::Q1).await?.2;
            warm.push(ms(timing.execute));
            cpu.push(ms(timing.aggregate));
        }
        let listed: Vec<String> = warm.iter().map(|t| format!("{t:.1}")).collect();
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
        };
        println!(
            "warm runs: {} ms; median {:.1} ms (aggregation CPU time {:.1} ms)",
            listed.join(", "),
            median(&mut warm),
            median(&mut cpu)
        );
    }
    Ok(())
}

/// Where the plan's aggregation ran: the GPU with its times, or the CPU.
fn where_it_ran(plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>) -> String {
    let mut stack = vec![Arc::clone(plan)];
    while let Some(p) = stack.pop() {
        if let Some(g) = p.downcast_ref::<grouper::exec::GroupByExec>() {
            return match g.last_gpu_report() {
                Some(r) => format!(
                    "GPU {}, {}, kernels {:.2} ms, compile {:.1} ms, upload {:.1} ms",
                    r.device, r.strategy, r.kernel_ms, r.compile_ms, r.upload_ms
                ),
                None => "CPU".into(),
            };
        }
        stack.extend(p.children().into_iter().cloned());
    }
    "not used".into()
}

pub async fn gen_tpch(sf: f64, dir: &Path) -> Result<()> {
    crate::tpch::check_sf(sf)?;
    let sub = dir.join("lineitem");
    std::fs::create_dir_all(&sub).with_context(|| format!("cannot create {}", sub.display()))?;
    let parts = std::thread::available_parallelism().map_or(1, |n| n.get());
    let bar = progress::rows(crate::tpch::lineitem_rows(sf), "generating lineitem");
    // Each part written as it is generated, batch by batch: generated whole first, SF 30 (180M
    // rows) outgrew a 24 GiB machine and the kernel killed the process without a word.
    (1..=parts)
        .into_par_iter()
        .try_for_each(|p| -> Result<()> {
            let path = sub.join(format!("part-{}.parquet", p - 1));
            let file =
                File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
            let mut w =
                ArrowWriter::try_new(file, tpchgen_arrow::LineItemArrow::schema_ref(), None)?;
            for b in crate::tpch::part_batches(sf, p, parts) {
                let b = b?;
                bar.inc(b.num_rows() as u64);
                w.write(&b)?;
            }
            w.close()?;
            Ok(())
        })?;
    bar.finish_and_clear();
    eprintln!(
        "wrote {} (query it as FROM '{}/*.parquet')",
        sub.display(),
        sub.display()
    );
    Ok(())
}

pub fn gen_synthetic(spec: &crate::synthetic::Spec, path: &Path) -> Result<()> {
    let batches = crate::synthetic::generate(spec)?;
    write_table(&batches, crate::synthetic::schema(spec.key_type), path)?;
    eprintln!("wrote {} rows to {}", spec.rows, path.display());
    Ok(())
}

/// `grouper gen groupby`: the db-benchmark G1 table.
pub fn gen_groupby(spec: &crate::groupby_data::Spec, path: &Path) -> Result<()> {
    let batches = crate::groupby_data::generate(spec)?;
    write_table(&batches, crate::groupby_data::schema(), path)?;
    eprintln!("wrote {} rows to {}", spec.rows, path.display());
    Ok(())
}

/// Writes `batches` to `path` as CSV, Arrow IPC or (any other extension) Parquet.
fn write_table(
    batches: &[arrow::array::RecordBatch],
    schema: arrow::datatypes::SchemaRef,
    path: &Path,
) -> Result<()> {
    let lower = path.to_string_lossy().to_ascii_lowercase();
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    if lower.ends_with(".csv") {
        let mut w = arrow::csv::WriterBuilder::new()
            .with_header(true)
            .build(file);
        for b in batches {
            w.write(b)?;
        }
    } else if lower.ends_with(".arrow") || lower.ends_with(".ipc") {
        let mut w = arrow::ipc::writer::FileWriter::try_new(file, &schema)?;
        for b in batches {
            w.write(b)?;
        }
        w.finish()?;
    } else {
        let mut w = ArrowWriter::try_new(file, schema, None)?;
        for b in batches {
            w.write(b)?;
        }
        w.close()?;
    }
    Ok(())
}
