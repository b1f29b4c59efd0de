"""arq's side of the I/O benchmark: a coroutine job that awaits, and the worker
settings (``max_jobs`` from ``$BENCH_ARQ_MAX_JOBS``; arq's defaults otherwise)."""

from __future__ import annotations

import asyncio
import os
from typing import Any, ClassVar

from arq.connections import RedisSettings

from bench.peers import common


async def io_async(ctx: dict[str, Any], ms: float) -> None:
    """Await ``ms`` milliseconds (the same job as ``bench.tasks.io_async``)."""
    await asyncio.sleep(ms / 1000)


class WorkerSettings:
    functions: ClassVar[list[Any]] = [io_async]
    redis_settings = RedisSettings.from_dsn(common.url())
    max_jobs = int(os.environ.get("BENCH_ARQ_MAX_JOBS", "10"))
    burst = True
