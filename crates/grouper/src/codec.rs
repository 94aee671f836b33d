//! [`GroupByCodec`]: grouper's nodes in DataFusion's serialised plans (a
//! `PhysicalExtensionCodec`), so that a distributed engine (datafusion-distributed, Ballista)
//! can send them to its workers.
//!
//! A node is written as the aggregation it came from — DataFusion's own `AggregateExec`, which
//! DataFusion serialises itself, over an empty placeholder input — with its phase and its
//! output schema. The reading side translates it again ([`crate::rule::translate`]) over the
//! real input the plan's framework decoded, fuses it with that input's scan, and runs it with
//! the engine of its own session (a worker's GPU, its threads): the engine travels with the
//! session ([`crate::config::Engine`] is a session extension), not with the plan.

use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::bytes::{
    physical_plan_from_bytes_with_proto_converter, physical_plan_to_bytes_with_proto_converter,
};
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use datafusion_proto::protobuf;
use prost::Message;

use crate::config::{Backend, Engine};
use crate::exec::{GroupByExec, Phase};
use crate::fuse::fuse;
use crate::group_by::GroupByPlan;
use crate::merge::MergeExec;
use crate::rule::translate;

/// What a node's bytes start with.
const MAGIC: &[u8; 4] = b"GRPR";
/// Which node follows.
const WHOLE: u8 = 0;
const PARTIAL: u8 = 1;
const MERGE: u8 = 2;

/// Reads and writes [`GroupByExec`] and [`MergeExec`]; anything else is left to the codecs
/// after it.
#[derive(Debug, Default, Clone, Copy)]
pub struct GroupByCodec;

fn malformed(what: &str) -> DataFusionError {
    DataFusionError::Internal(format!("a grouper plan node's bytes are malformed: {what}"))
}

/// Appends `bytes` with its length in front.
fn put(buf: &mut Vec<u8>, bytes: &[u8]) {
    buf.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    buf.extend_from_slice(bytes);
}

/// The next length-prefixed part of `buf`, and the rest.
fn take(buf: &[u8]) -> Result<(&[u8], &[u8])> {
    let (len, rest) = buf.split_at_checked(8).ok_or_else(|| malformed("length"))?;
    let len = u64::from_le_bytes(len.try_into().map_err(|_| malformed("length"))?);
    rest.split_at_checked(usize::try_from(len).map_err(|_| malformed("length"))?)
        .ok_or_else(|| malformed("part"))
}

impl GroupByCodec {
    fn encode_parts(
        &self,
        phase: u8,
        outputs: usize,
        plan: &GroupByPlan,
        schema: &SchemaRef,
        buf: &mut Vec<u8>,
        converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        let origin = plan.origin.as_ref().ok_or_else(|| {
            DataFusionError::NotImplemented(
                "this grouper node was not made from a DataFusion aggregate".into(),
            )
        })?;
        let origin =
            physical_plan_to_bytes_with_proto_converter(Arc::clone(origin), self, converter)?;
        let schema = protobuf::Schema::try_from(schema.as_ref())?.encode_to_vec();
        buf.extend_from_slice(MAGIC);
        buf.push(phase);
        buf.extend_from_slice(&(outputs as u64).to_le_bytes());
        put(buf, &origin);
        put(buf, &schema);
        Ok(())
    }
}

impl PhysicalExtensionCodec for GroupByCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let rest = buf
            .strip_prefix(MAGIC)
            .ok_or_else(|| DataFusionError::NotImplemented("not a grouper node".into()))?;
        let (&phase, rest) = rest.split_first().ok_or_else(|| malformed("phase"))?;
        let (outputs, rest) = rest
            .split_at_checked(8)
            .ok_or_else(|| malformed("outputs"))?;
        let outputs = u64::from_le_bytes(outputs.try_into().map_err(|_| malformed("outputs"))?);
        let (origin, rest) = take(rest)?;
        let (schema, _) = take(rest)?;
        let [input] = inputs else {
            return Err(malformed("a grouper node has one input"));
        };
        let origin = physical_plan_from_bytes_with_proto_converter(origin, ctx, self, converter)?;
        let schema: SchemaRef = Arc::new(Schema::try_from(
            &protobuf::Schema::decode(schema).map_err(|e| malformed(&e.to_string()))?,
        )?);
        let engine = ctx
            .session_config()
            .get_extension::<Engine>()
            .ok_or_else(|| {
                DataFusionError::Plan(
                    "a grouper plan reached a session without grouper (build the worker's session with grouper::session_state)".into(),
                )
            })?;
        // The partial and whole phases read the real input; the merge reads partial groups.
        let over = match phase {
            MERGE => Arc::clone(&origin),
            _ => Arc::clone(&origin).replace_children(vec![Arc::clone(input)], recompute())?,
        };
        let agg = over
            .downcast_ref::<AggregateExec>()
            .ok_or_else(|| malformed("the origin is not an aggregate"))?;
        let mut plan =
            translate(agg)?.ok_or_else(|| malformed("the aggregate does not translate"))?;
        plan.origin = Some(origin);
        if phase != MERGE && engine.backend != Backend::DataFusion {
            let keys: Vec<_> = plan.keys.iter().map(|(e, _)| Arc::clone(e)).collect();
            plan.fused = fuse(input, &keys, &plan.args);
        }
        let plan = Arc::new(plan);
        let outputs = usize::try_from(outputs).map_err(|_| malformed("outputs"))?;
        let input = Arc::clone(input);
        Ok(match phase {
            WHOLE => Arc::new(GroupByExec::new(input, plan, schema, engine, outputs)),
            PARTIAL => Arc::new(GroupByExec::partial(input, plan, engine, outputs)?),
            MERGE => Arc::new(MergeExec::new(input, plan, schema)),
            _ => return Err(malformed("phase")),
        })
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        if let Some(g) = node.downcast_ref::<GroupByExec>() {
            let phase = match g.phase() {
                Phase::Whole => WHOLE,
                Phase::Partial => PARTIAL,
            };
            let outputs = g.output_partitions();
            return self.encode_parts(phase, outputs, g.group_by(), &g.schema(), buf, converter);
        }
        if let Some(m) = node.downcast_ref::<MergeExec>() {
            return self.encode_parts(MERGE, 0, m.group_by(), &m.schema(), buf, converter);
        }
        Err(DataFusionError::NotImplemented(format!(
            "grouper's codec does not write {}",
            node.name()
        )))
    }
}

/// Children replaced with the node's properties computed again.
fn recompute() -> ReplaceChildrenOptions {
    ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute)
}

#[cfg(test)]
mod tests {
    use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
    use arrow::compute::concat_batches;
    use datafusion::catalog::MemTable;
    use datafusion::physical_plan::{collect, displayable};
    use datafusion::prelude::SessionContext;
    use datafusion_proto::bytes::{
        physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
    };
    use grouper_core::compare::same_groups;

    use super::*;
    use crate::test_support::physical_plan;
    use crate::{Backend, GrouperConfig};

    const SQL: &str = "SELECT k, s, sum(v), avg(v), count(*), min(s), median(v), stddev(v), \
        corr(v, CAST(k AS DOUBLE)) FROM t GROUP BY k, s";

    /// A session of `backend` over `t`: 20k rows in four partitions, an integer key with NULLs
    /// and a string key.
    fn session(backend: Backend, distributed: bool) -> SessionContext {
        let n = 20_000;
        let k = Int64Array::from_iter((0..n).map(|i| (i % 7 != 0).then_some(i % 97)));
        let s = StringArray::from_iter_values((0..n).map(|i| format!("s{}", i % 13)));
        let v = Float64Array::from_iter_values((0..n).map(|i| (i % 101) as f64 * 0.25));
        let batch = RecordBatch::try_from_iter([
            ("k", Arc::new(k) as _),
            ("s", Arc::new(s) as _),
            ("v", Arc::new(v) as _),
        ])
        .unwrap();
        let parts = (0..4).map(|p| vec![batch.slice(p * 5000, 5000)]).collect();
        let ctx = crate::session_context(&GrouperConfig {
            backend,
            threads: Some(4),
            grouper_only: true,
            distributed,
            ..Default::default()
        })
        .unwrap();
        let table = MemTable::try_new(batch.schema(), parts).unwrap();
        ctx.register_table("t", Arc::new(table)).unwrap();
        ctx
    }

    async fn answer(plan: Arc<dyn ExecutionPlan>, ctx: &SessionContext) -> RecordBatch {
        let schema = plan.schema();
        concat_batches(&schema, &collect(plan, ctx.task_ctx()).await.unwrap()).unwrap()
    }

    #[tokio::test]
    async fn plans_in_both_phases_cross_the_codec_and_answer_as_datafusion() {
        let reference = session(Backend::DataFusion, false);
        let want = answer(physical_plan(&reference, SQL).await, &reference).await;
        for distributed in [true, false] {
            let ctx = session(Backend::Cpu, distributed);
            let plan = physical_plan(&ctx, SQL).await;
            let text = displayable(plan.as_ref()).indent(false).to_string();
            let phases = ["GroupByExec: phase=partial", "MergeExec", "RepartitionExec"];
            assert_eq!(phases.map(|p| text.contains(p)), [distributed; 3], "{text}");
            let bytes = physical_plan_to_bytes_with_extension_codec(plan, &GroupByCodec).unwrap();
            let back = physical_plan_from_bytes_with_extension_codec(
                &bytes,
                &ctx.task_ctx(),
                &GroupByCodec,
            )
            .unwrap();
            assert_eq!(displayable(back.as_ref()).indent(false).to_string(), text);
            let got = answer(back, &ctx).await;
            assert_eq!(
                same_groups(want.columns(), got.columns(), 2),
                Ok(()),
                "{text}"
            );
        }
    }

    #[tokio::test]
    async fn a_session_without_grouper_says_so() {
        let ctx = session(Backend::Cpu, true);
        let bytes = physical_plan_to_bytes_with_extension_codec(
            physical_plan(&ctx, SQL).await,
            &GroupByCodec,
        )
        .unwrap();
        let plain = SessionContext::new();
        let err =
            physical_plan_from_bytes_with_extension_codec(&bytes, &plain.task_ctx(), &GroupByCodec)
                .unwrap_err();
        assert!(err.to_string().contains("session without grouper"), "{err}");
    }
}
