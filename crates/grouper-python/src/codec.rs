//! The codecs grouper adds to a datafusion-python session's codec chain.
//!
//! datafusion-python serialises the logical plan it hands grouper's planner, and the physical
//! plan it takes back, with its session's codecs (it rebinds an installed planner to them), so
//! grouper's part is installed there (`grouper.install`, through `with_extensions`):
//!
//! - Logical plan, host to grouper: tables DataFusion cannot serialise (an in-memory table, a
//!   Python dataset) pass by handle ([`crate::handles`]); functions grouper's DataFusion has
//!   (every built-in) are marked to be rebuilt from grouper's own registry, so that grouper's
//!   rule sees DataFusion's real `sum` and `count` rather than the host's through FFI. Python
//!   UDFs stay with the host's codec, which the chain asks first.
//! - Physical plan, grouper to host: the one node the planner returns
//!   ([`crate::planner::GrouperPlanExec`]) passes by handle, its subtree untouched.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::common::not_impl_err;
use datafusion::common::TableReference;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SessionState, TaskContext};
use datafusion::logical_expr::{AggregateUDF, Extension, LogicalPlan, ScalarUDF, WindowUDF};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};

use crate::handles::Handles;
use crate::planner::GrouperPlanExec;

/// Tables of the host's that pass by handle.
static TABLES: Handles<Arc<dyn TableProvider>> = Handles::new(*b"gtbl");
/// Planned subtrees that pass by handle.
static PLANS: Handles<Arc<dyn ExecutionPlan>> = Handles::new(*b"gpln");

/// A function's bytes: rebuild it from grouper's registry by name.
const NATIVE: &[u8] = b"grouper-native";

/// The functions grouper's own session knows, by name.
#[derive(Debug, Default)]
pub struct Functions {
    scalar: HashMap<String, Arc<ScalarUDF>>,
    aggregate: HashMap<String, Arc<AggregateUDF>>,
    window: HashMap<String, Arc<WindowUDF>>,
}

impl Functions {
    /// The functions registered in `state`.
    pub fn of(state: &SessionState) -> Self {
        Self {
            scalar: state.scalar_functions().clone(),
            aggregate: state.aggregate_functions().clone(),
            window: state.window_functions().clone(),
        }
    }
}

/// Writes the mark for grouper's own function of the name where grouper has one; writes
/// nothing otherwise (the function is found by name in the host's registry).
fn encode_function(native: bool, buf: &mut Vec<u8>) {
    if native {
        buf.extend_from_slice(NATIVE);
    }
}

/// Decodes what [`encode_function`] wrote.
fn decode_function<T>(name: &str, buf: &[u8], native: Option<&Arc<T>>) -> Result<Arc<T>> {
    match native {
        Some(f) if buf == NATIVE => Ok(Arc::clone(f)),
        _ => Err(DataFusionError::NotImplemented(format!(
            "grouper's codec does not decode the function {name}"
        ))),
    }
}

/// The logical codec (see the module's doc).
#[derive(Debug)]
pub struct LogicalCodec {
    functions: Arc<Functions>,
}

impl LogicalCodec {
    /// A codec rebuilding `functions` from grouper's registry.
    pub fn new(functions: Arc<Functions>) -> Self {
        Self { functions }
    }
}

impl LogicalExtensionCodec for LogicalCodec {
    fn try_decode(
        &self,
        _buf: &[u8],
        _inputs: &[LogicalPlan],
        _ctx: &TaskContext,
    ) -> Result<Extension> {
        not_impl_err!("grouper's codec has no logical extension nodes")
    }

    fn try_encode(&self, _node: &Extension, _buf: &mut Vec<u8>) -> Result<()> {
        not_impl_err!("grouper's codec has no logical extension nodes")
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        _schema: SchemaRef,
        _ctx: &TaskContext,
    ) -> Result<Arc<dyn TableProvider>> {
        if !TABLES.owns(buf) {
            return not_impl_err!("{table_ref} was not written by grouper's codec");
        }
        TABLES.take(buf)
    }

    fn try_encode_table_provider(
        &self,
        _table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        TABLES.put(node, buf);
        Ok(())
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        decode_function(name, buf, self.functions.scalar.get(name))
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        encode_function(self.functions.scalar.contains_key(node.name()), buf);
        Ok(())
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        decode_function(name, buf, self.functions.aggregate.get(name))
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        encode_function(self.functions.aggregate.contains_key(node.name()), buf);
        Ok(())
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
        decode_function(name, buf, self.functions.window.get(name))
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> Result<()> {
        encode_function(self.functions.window.contains_key(node.name()), buf);
        Ok(())
    }
}

/// The physical codec of grouper's planner: planned subtrees pass by handle.
#[derive(Debug, Default)]
pub struct PhysicalCodec;

impl PhysicalExtensionCodec for PhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        _inputs: &[Arc<dyn ExecutionPlan>],
        _ctx: &TaskContext,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !PLANS.owns(buf) {
            return not_impl_err!("the plan was not written by grouper's codec");
        }
        PLANS.take(buf)
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        if !node.is::<GrouperPlanExec>() {
            return not_impl_err!("grouper's codec writes only grouper's plans");
        }
        PLANS.put(node, buf);
        Ok(())
    }
}
