//! `grouper._grouper`: the Rust half of the Python package `grouper`.
//!
//! Three capsules, which the package's `grouper.install` hands datafusion-python through its
//! extension protocol (`SessionContext.with_extensions`): grouper's logical and physical
//! codecs (added to the session's codec chain) and grouper's query planner. They use only the
//! capsules datafusion-python exports (its task-context provider), never the
//! datafusion-python crate, and create no `SessionContext` of their own.

mod codec;
mod handles;
mod planner;

use std::ptr::NonNull;
use std::sync::{Arc, OnceLock};

use datafusion::execution::SessionStateBuilder;
use datafusion_ffi::execution::FFI_TaskContextProvider;
use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::proto::physical_extension_codec::FFI_PhysicalExtensionCodec;
use datafusion_ffi::query_planner::FFI_QueryPlanner;
use grouper::{Backend, GrouperConfig};
use pyo3::exceptions::{PyImportError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use tokio::runtime::Runtime;

use crate::codec::{Functions, LogicalCodec, PhysicalCodec};
use crate::planner::GrouperPlanner;

/// This library's Tokio runtime: grouper's planning and execution run on it (the host's
/// runtime belongs to its own copy of Tokio, which this library cannot enter).
fn runtime() -> PyResult<&'static Runtime> {
    static RUNTIME: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .thread_name("grouper-tokio")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| PyRuntimeError::new_err(format!("grouper: no Tokio runtime: {e}")))
}

/// The value inside capsule `name` that `obj.getter()` returns, checked for DataFusion's FFI
/// major version where the type carries one.
fn capsule<'py, T: Clone>(
    obj: &Bound<'py, PyAny>,
    getter: &str,
    name: &'static std::ffi::CStr,
) -> PyResult<T> {
    let value = obj.call_method0(getter).map_err(|e| {
        PyImportError::new_err(format!(
            "grouper needs datafusion 55 (datafusion-python's {getter} failed: {e})"
        ))
    })?;
    let capsule = value.cast::<PyCapsule>()?;
    let data: NonNull<T> = capsule.pointer_checked(Some(name))?.cast();
    // SAFETY: the capsule carries the name DataFusion's FFI gives this type, checked just
    // above, so it points at a live `T` that datafusion-python owns for the capsule's life;
    // it is cloned (FFI clone functions) before the capsule can go.
    Ok(unsafe { data.as_ref() }.clone())
}

/// The host's task-context provider (what codec callbacks resolve names against), checked
/// to come from the DataFusion major this library is built for.
fn task_ctx_provider(ctx: &Bound<'_, PyAny>) -> PyResult<FFI_TaskContextProvider> {
    let host_codec: FFI_LogicalExtensionCodec = capsule(
        ctx,
        "__datafusion_logical_extension_codec__",
        c"datafusion_logical_extension_codec",
    )?;
    // SAFETY: `version` is a plain function of the host's library, which stays loaded.
    let host_version = unsafe { (host_codec.version)() };
    if host_version != datafusion_ffi::version() {
        return Err(PyImportError::new_err(format!(
            "grouper is built for DataFusion {}, the session is DataFusion {host_version}",
            datafusion_ffi::version(),
        )));
    }
    capsule(
        ctx,
        "__datafusion_task_context_provider__",
        c"datafusion_task_context_provider",
    )
}

/// The functions of grouper's DataFusion, by name (the same in every session).
fn functions() -> Arc<Functions> {
    static FUNCTIONS: OnceLock<Arc<Functions>> = OnceLock::new();
    Arc::clone(FUNCTIONS.get_or_init(|| {
        let state = SessionStateBuilder::new().with_default_features().build();
        Arc::new(Functions::of(&state))
    }))
}

/// grouper's logical codec for the session `ctx`, as a `datafusion_logical_extension_codec`
/// capsule.
#[pyfunction]
fn logical_codec<'py>(py: Python<'py>, ctx: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyCapsule>> {
    let codec = FFI_LogicalExtensionCodec::new(
        Arc::new(LogicalCodec::new(functions())),
        Some(runtime()?.handle().clone()),
        task_ctx_provider(ctx)?,
    );
    PyCapsule::new_with_value(py, codec, c"datafusion_logical_extension_codec")
}

/// grouper's physical codec for the session `ctx`, as a `datafusion_physical_extension_codec`
/// capsule.
#[pyfunction]
fn physical_codec<'py>(
    py: Python<'py>,
    ctx: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyCapsule>> {
    let codec = FFI_PhysicalExtensionCodec::new(
        Arc::new(PhysicalCodec),
        Some(runtime()?.handle().clone()),
        task_ctx_provider(ctx)?,
    );
    PyCapsule::new_with_value(py, codec, c"datafusion_physical_extension_codec")
}

/// grouper's query planner for the session `ctx`, as a `datafusion_query_planner` capsule.
/// datafusion-python rebinds it to the session's codec chain, which must hold grouper's
/// codecs.
#[pyfunction]
#[pyo3(signature = (ctx, backend = "auto", threads = None, memory_limit = None))]
fn query_planner<'py>(
    py: Python<'py>,
    ctx: &Bound<'py, PyAny>,
    backend: &str,
    threads: Option<usize>,
    memory_limit: Option<usize>,
) -> PyResult<Bound<'py, PyCapsule>> {
    let backend: Backend = backend.parse().map_err(PyValueError::new_err)?;
    let config = GrouperConfig {
        backend,
        threads,
        memory_limit,
        ..GrouperConfig::default()
    };
    let state = grouper::session::session_state(&config)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let runtime = runtime()?.handle().clone();
    let planner = FFI_QueryPlanner::new(
        Arc::new(GrouperPlanner::new(state, backend, runtime.clone())),
        Some(runtime),
        task_ctx_provider(ctx)?,
        Arc::new(LogicalCodec::new(functions())),
        Arc::new(PhysicalCodec),
    );
    PyCapsule::new_with_value(py, planner, c"datafusion_query_planner")
}

/// What a session with `backend` aggregates on: the GPU it finds and the CPU, or why the CPU
/// alone.
#[pyfunction]
#[pyo3(signature = (backend = "auto"))]
fn device(backend: &str) -> PyResult<String> {
    let backend: Backend = backend.parse().map_err(PyValueError::new_err)?;
    Ok(grouper::device_facts::describe(backend))
}

#[pymodule]
fn _grouper(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(logical_codec, m)?)?;
    m.add_function(wrap_pyfunction!(physical_codec, m)?)?;
    m.add_function(wrap_pyfunction!(query_planner, m)?)?;
    m.add_function(wrap_pyfunction!(device, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
