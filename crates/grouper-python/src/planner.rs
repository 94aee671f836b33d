//! grouper's query planner for a datafusion-python session.
//!
//! datafusion-python plans and optimises the logical plan as usual, then hands it to this
//! planner (DataFusion's FFI query planner). The plan is decoded here, in grouper's library,
//! so the physical plan is made of real DataFusion nodes that grouper's rule can rewrite; a
//! physical optimizer rule installed across FFI would see only opaque foreign nodes. The
//! physical plan then runs here too, as one node ([`GrouperPlanExec`]) that the host
//! executes through FFI: nothing is serialised or copied on the way back.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::context::QueryPlanner;
use datafusion::execution::{SessionState, TaskContext};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::{
    displayable, DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties,
    SendableRecordBatchStream,
};
use grouper::Backend;
use tokio::runtime::Handle;

/// Plans the host's queries with grouper's session: its rules, runtime and worker pool.
#[derive(Debug)]
pub struct GrouperPlanner {
    /// grouper's session, made once at install (its worker pool, profiles, footer cache);
    /// each query plans on a copy carrying the host's settings.
    state: SessionState,
    backend: Backend,
    /// grouper's own Tokio runtime: the host polls this library's futures from its threads,
    /// where this library's Tokio has no runtime entered.
    runtime: Handle,
}

impl GrouperPlanner {
    /// A planner over grouper's `state`, for `backend`, running on `runtime`.
    pub fn new(state: SessionState, backend: Backend, runtime: Handle) -> Self {
        Self {
            state,
            backend,
            runtime,
        }
    }
}

#[async_trait]
impl QueryPlanner for GrouperPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session: &dyn Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let mut state = self.state.clone();
        // The host's settings (`SET`, its SessionConfig), but GPU sessions keep their larger
        // batches (grouper::session::GPU_BATCH_SIZE says why).
        let batch_size = state.config().options().execution.batch_size;
        *state.config_mut().options_mut() = session.config_options().clone();
        if matches!(self.backend, Backend::Gpu | Backend::Hybrid) {
            state.config_mut().options_mut().execution.batch_size = batch_size;
        }
        let logical_plan = match logical_plan {
            // The host optimised the plan under EXPLAIN before handing it over, but its
            // serialised form drops that flag (and the intermediate plans), and an EXPLAIN
            // not marked optimised prints no physical plan.
            LogicalPlan::Explain(e) if !e.logical_optimization_succeeded => {
                let mut e = e.clone();
                e.logical_optimization_succeeded = true;
                e.stringified_plans.clear();
                LogicalPlan::Explain(e)
            }
            plan => plan.clone(),
        };
        let planned = self.runtime.spawn(async move {
            let plan = state
                .query_planner()
                .create_physical_plan(&logical_plan, &state)
                .await?;
            Ok::<_, DataFusionError>((plan, state.task_ctx()))
        });
        let (plan, task_ctx) = planned
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))??;
        Ok(Arc::new(GrouperPlanExec::new(plan, task_ctx)))
    }
}

/// A physical plan grouper planned, as one leaf the host executes: each partition runs the
/// plan under grouper's own task context (its runtime's memory pool and caches, its batch
/// size), not the host's, which comes through FFI without them.
#[derive(Debug)]
pub struct GrouperPlanExec {
    plan: Arc<dyn ExecutionPlan>,
    task_ctx: Arc<TaskContext>,
}

impl GrouperPlanExec {
    fn new(plan: Arc<dyn ExecutionPlan>, task_ctx: Arc<TaskContext>) -> Self {
        Self { plan, task_ctx }
    }
}

impl DisplayAs for GrouperPlanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::TreeRender => write!(f, "grouper"),
            _ => write!(
                f,
                "GrouperPlanExec\n{}",
                displayable(self.plan.as_ref()).indent(true)
            ),
        }
    }
}

impl ExecutionPlan for GrouperPlanExec {
    fn name(&self) -> &'static str {
        "GrouperPlanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.plan.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            Err(DataFusionError::Internal(
                "GrouperPlanExec takes no children".into(),
            ))
        }
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        self.plan.execute(partition, Arc::clone(&self.task_ctx))
    }
}
