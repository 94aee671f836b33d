"""grouper's GROUP BY operator (GPU and CPU) inside datafusion-python.

    import datafusion, grouper
    ctx = datafusion.SessionContext()
    grouper.install(ctx)              # every later query of ctx plans with grouper
    ctx.register_parquet("lineitem", "lineitem.parquet")
    ctx.sql("SELECT l_returnflag, sum(l_quantity) FROM lineitem GROUP BY 1").to_arrow_table()

or, without datafusion-python's API:

    grouper.sql("SELECT k, count(*) FROM t GROUP BY k", tables={"t": arrow_table})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import datafusion
import pyarrow as pa

from grouper import _grouper
from grouper._grouper import __version__, device

__all__ = ["install", "sql", "device", "__version__"]

BACKENDS = ("auto", "cpu", "gpu", "hybrid", "datafusion")


class _LogicalCodec:
    """grouper's logical codec, as datafusion-python's extension protocol hands it over."""

    __datafusion_codec_id__ = "grouper.logical.v1"

    def __init__(self, ctx: datafusion.SessionContext) -> None:
        self._capsule = _grouper.logical_codec(ctx)

    def __datafusion_logical_extension_codec__(self, session: Any = None) -> Any:
        return self._capsule


class _PhysicalCodec:
    """grouper's physical codec, as datafusion-python's extension protocol hands it over."""

    __datafusion_codec_id__ = "grouper.physical.v1"

    def __init__(self, ctx: datafusion.SessionContext) -> None:
        self._capsule = _grouper.physical_codec(ctx)

    def __datafusion_physical_extension_codec__(self, session: Any = None) -> Any:
        return self._capsule


class _Extension:
    """grouper as a datafusion-python extension bundle: its codecs, then its planner."""

    def __init__(self, backend: str, threads: int | None, memory_limit: int | None) -> None:
        self._options = (backend, threads, memory_limit)

    def __datafusion_session_components__(self, ctx: datafusion.SessionContext) -> Any:
        return datafusion.SessionExtensionComponents(
            logical_extension_codecs=(_LogicalCodec(ctx),),
            physical_extension_codecs=(_PhysicalCodec(ctx),),
        )

    def __datafusion_session_planner__(self, ctx: datafusion.SessionContext, fallback: Any) -> Any:
        # grouper plans the physical plan itself (DataFusion's planner with grouper's rules),
        # so the fallback is not called.
        backend, threads, memory_limit = self._options
        return _grouper.query_planner(ctx, backend, threads=threads, memory_limit=memory_limit)


def install(
    ctx: datafusion.SessionContext,
    backend: str = "auto",
    *,
    threads: int | None = None,
    memory_limit: int | None = None,
) -> None:
    """Make every later query of ``ctx`` plan with grouper.

    grouper's query planner replaces the session's: datafusion-python's logical planning and
    optimisation stay as they are, and grouper makes the physical plan with DataFusion's
    planner and grouper's rules, so aggregations run on grouper's CPU strategies or the GPU.
    Installing again changes the options. Install other libraries' planners before grouper.

    backend: ``auto`` (the best engine per query), ``cpu``, ``gpu`` and ``hybrid`` (both an
    error without a GPU), or ``datafusion`` (DataFusion's own aggregation).
    threads: worker threads of grouper's pool (all cores by default).
    memory_limit: bytes grouper's aggregation state and DataFusion's operators may hold.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r} (expected one of {', '.join(BACKENDS)})")
    if _LogicalCodec.__datafusion_codec_id__ in ctx.logical_extension_codec_ids():
        # Installed before: the codecs are on this handle, the planner is replaced.
        ctx.set_query_planner(
            _grouper.query_planner(ctx, backend, threads=threads, memory_limit=memory_limit)
        )
        return
    # `with_extensions` installs the codecs on a new handle of the same session (and the
    # planner on the session); this handle takes the new one's place, so the caller's ctx
    # carries grouper's codecs.
    ctx.ctx = ctx.with_extensions(_Extension(backend, threads, memory_limit)).ctx


def sql(
    query: str,
    tables: Mapping[str, Any] | None = None,
    *,
    backend: str = "auto",
    threads: int | None = None,
) -> pa.Table:
    """Run one SQL query with grouper and return its answer as a pyarrow Table.

    tables: name -> a pyarrow Table or RecordBatch, anything with ``__arrow_c_stream__``
    (Polars, pandas through pyarrow), or a path to a Parquet file or folder (a ``str``).
    """
    config = datafusion.SessionConfig()
    if threads is not None:
        config = config.with_target_partitions(threads)
    ctx = datafusion.SessionContext(config)
    install(ctx, backend, threads=threads)
    for name, table in (tables or {}).items():
        if isinstance(table, str):
            ctx.register_parquet(name, table)
        else:
            if isinstance(table, pa.RecordBatch):
                table = pa.Table.from_batches([table])
            ctx.from_arrow(table, name=name)
    return ctx.sql(query).to_arrow_table()
