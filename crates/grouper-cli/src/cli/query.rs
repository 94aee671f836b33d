//! `grouper query`, `grouper demo` and `grouper gen`.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use rayon::prelude::*;

use grouper_shell::session::run_sql;
use grouper_shell::tables::register_tables;
use grouper_shell::{explain, output, progress};

use super::{DemoArgs, QueryArgs};

/// Prints the plan with its metrics, and the aggregations `auto` left to DataFusion (`kept`).
fn print_explain(plan: &Arc<dyn ExecutionPlan>, kept: &[String]) {
    print!("{}", explain::explain(plan, kept));
}

pub async fn query(args: QueryArgs) -> Result<()> {
    if args.bytes_per_task.is_some() && args.workers.is_empty() {
        anyhow::bail!("--bytes-per-task needs --workers");
    }
    let ctx = match args.workers.is_empty() {
        true => grouper::session_context(&args.engine.config())?,
        false => {
            let workers = args
                .workers
                .iter()
                .map(|w| {
                    url::Url::parse(w).with_context(|| {
                        format!("--workers: '{w}' is not a URL such as http://host:50061")
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let state = grouper_distributed::coordinator(
                &args.engine.config(),
                workers,
                args.bytes_per_task,
            )?;
            SessionContext::new_with_state(state).enable_url_table()
        }
    };
    let threads = ctx.state().config().target_partitions();
    register_tables(&ctx, &args.tables).await?;
    grouper_core::trace::event(|| "session and tables ready".into());
    let (plan, batches, timing) = run_sql(&ctx, &args.sql, true).await?;
    if args.explain {
        match args.workers.is_empty() {
            true => print_explain(&plan, &grouper::harm::take_kept(&ctx)),
            // The stages, with the workers' tasks and their metrics.
            false => print!(
                "{}",
                grouper_distributed::display_plan_ascii(plan.as_ref(), true)
            ),
        }
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
    let (plan, batches, timing) = run_sql(&ctx, crate::tpch::Q1, true).await?;
    let kept = grouper::harm::take_kept(&ctx);
    if args.explain {
        print_explain(&plan, &kept);
    }
    output::write(&batches, output::Format::Table, None, threads)?;
    let engine = match config.backend {
        grouper::Backend::DataFusion => "DataFusion's aggregation".to_string(),
        b => match kept.first() {
            Some(why) if !explain::uses_grouper(&plan) => format!(
                "DataFusion's aggregation ({b} backend left it there: {why}; --grouper-only or --backend cpu runs grouper's)"
            ),
            _ => format!("grouper ({b} backend: {})", explain::where_it_ran(&plan)),
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
            let timing = run_sql(&ctx, crate::tpch::Q1, true).await?.2;
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
