//! What a plan did: its operators with their metrics, and where grouper's aggregation ran.

use std::sync::Arc;
use std::time::Duration;

use datafusion::physical_plan::ExecutionPlan;
use grouper::exec::GroupByExec;

/// CPU time of the GroupByExec nodes in `plan`, summed over their workers.
pub fn aggregate_time(plan: &Arc<dyn ExecutionPlan>) -> Duration {
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

/// Whether grouper's operator is in `plan`.
pub fn uses_grouper(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.downcast_ref::<GroupByExec>().is_some() || plan.children().into_iter().any(uses_grouper)
}

/// The plan with its metrics, and the aggregations `auto` left to DataFusion (`kept`).
pub fn explain(plan: &Arc<dyn ExecutionPlan>, kept: &[String]) -> String {
    let mut text =
        datafusion::physical_plan::display::DisplayableExecutionPlan::with_metrics(plan.as_ref())
            .indent(true)
            .to_string();
    for kept in kept {
        text.push_str(&format!("grouper left an aggregation to DataFusion's AggregateExec (auto; --grouper-only takes it): {kept}\n"));
    }
    if !uses_grouper(plan) {
        text.push_str("grouper: no GroupByExec in this plan (no aggregation, an unsupported aggregate or type, or --backend datafusion); DataFusion's operators ran.\n");
    }
    text
}

/// Where the plan's aggregation ran: the GPU with its times, or the CPU.
pub fn where_it_ran(plan: &Arc<dyn ExecutionPlan>) -> String {
    let mut stack = vec![Arc::clone(plan)];
    while let Some(p) = stack.pop() {
        if let Some(g) = p.downcast_ref::<GroupByExec>() {
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
