"""Both runners behind one face, for protocol tests parametrised over them: the
engine's :class:`SyncRunner` as it is, and the worker's :class:`AsyncRunner`
with each of its steps run to its end on one event loop of the test's own."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from django_emq.engine.runner import AsyncRunner, SyncRunner


class Blocking:
    """An :class:`AsyncRunner` answering each call at once, as a
    :class:`SyncRunner` does (``run``, ``run_all``, ``run_many``, ``park``...)."""

    def __init__(self, runner: AsyncRunner) -> None:
        self.steps = runner
        self.loop = asyncio.new_event_loop()

    def __getattr__(self, name: str) -> Any:
        step = getattr(self.steps, name)
        if not inspect.iscoroutinefunction(step):
            return step
        return lambda *args, **kwargs: self.loop.run_until_complete(step(*args, **kwargs))

    def close(self) -> None:
        self.loop.run_until_complete(self.steps.client.aclose())
        self.loop.close()


#: Either runner, as a test drives it.
Runs = SyncRunner | Blocking


def both(sync_client: Any, async_client: Callable[[], Any], kind: str) -> Runs:
    """The runner ``kind`` (``"sync"`` or ``"async"``) names."""
    if kind == "sync":
        return SyncRunner(sync_client)
    return Blocking(AsyncRunner(async_client()))
