"""Loads the Lua scripts in ``django_emq/engine/lua/`` and runs them.

Every ``<name>-<numkeys>.lua`` file in the folder is one operation; it is
registered by scanning the folder (no hand-kept list). A line
``-- @include "helper"`` pulls in ``lua/includes/helper.lua`` once; includes
may include others; a cycle is an error. Running a script goes through
redis-py's :class:`~redis.commands.core.Script`, which uses EVALSHA and
reloads the script after a ``SCRIPT FLUSH``.

On a Valkey Cluster the client is a :class:`~redis.cluster.RedisCluster`
and each call goes to the node of its keys' slot (every key of a call shares
the queue's hash tag). A script missing there (a new node, a promoted
replica, a flush) is loaded on that node alone: redis-py's ``SCRIPT LOAD``
goes to every primary, and fails while any one of them is down. redis-py's
cluster pipeline refuses ``pipe.evalsha()``, so calls on a pipeline are
queued as plain ``EVALSHA`` commands, routed by their keys.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from redis.cluster import ClusterPipeline, RedisCluster
from redis.commands.core import Script
from redis.exceptions import NoScriptError, ResponseError

from .exceptions import ScriptError, script_error

INCLUDE_RE = re.compile(r'^--\s*@include\s+"([a-z_]+)"\s*$', re.MULTILINE)
NAME_RE = re.compile(r"([a-z_]+)-(\d+)\.lua")


@dataclass(frozen=True, slots=True)
class LuaSource:
    """One operation's expanded source and its declared key count."""

    name: str
    numkeys: int
    source: str


def _expand(text: str, folder: Any, seen: set[str], stack: tuple[str, ...]) -> str:
    def include(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in stack:
            raise ScriptError(f"include cycle: {' -> '.join((*stack, name))}")
        if name in seen:
            return f"-- (included above: {name})"
        path = folder / "includes" / f"{name}.lua"
        if not path.is_file():
            raise ScriptError(f"missing include {name!r} (from {stack[-1]})")
        seen.add(name)
        body = _expand(path.read_text(), folder, seen, (*stack, name))
        return f"-- begin include {name}\n{body}\n-- end include {name}"

    return INCLUDE_RE.sub(include, text)


@cache
def sources() -> dict[str, LuaSource]:
    """Every operation in the package's ``lua`` folder, includes expanded."""
    folder = resources.files("django_emq.engine") / "lua"
    found: dict[str, LuaSource] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".lua"):
            continue
        match = NAME_RE.fullmatch(entry.name)
        if not match:
            raise ScriptError(f"{entry.name}: a script is named <operation>-<numkeys>.lua")
        name = match.group(1)
        if name in found:
            raise ScriptError(f"two scripts for operation {name!r}")
        text = _expand(entry.read_text(), folder, set(), (name,))
        found[name] = LuaSource(name, int(match.group(2)), text)
    return found


class Scripts:
    """The operations bound to one client (or cluster client)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._scripts: dict[str, tuple[int, Script]] = {
            name: (src.numkeys, client.register_script(src.source))
            for name, src in sources().items()
        }

    def __call__(
        self, name: str, keys: Sequence[str], args: Sequence[Any], client: Any = None
    ) -> Any:
        """Run operation ``name``; ``client`` may be a pipeline to batch calls.
        A key of the wrong type raises :class:`~django_emq.exceptions.CorruptKeyspace`."""
        try:
            return self._call(name, keys, args, client)
        except ResponseError as exc:
            mapped = script_error(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    def _call(self, name: str, keys: Sequence[str], args: Sequence[Any], client: Any) -> Any:
        numkeys, script = self._scripts[name]
        if len(keys) != numkeys:
            raise ScriptError(f"{name} takes {numkeys} keys, got {len(keys)}")
        target = client or self._client
        if isinstance(target, ClusterPipeline):  # it cannot load scripts: load it now
            self._load_on_node_of(keys[0], script)
            pipe: Any = target
            return pipe.execute_command("EVALSHA", script.sha, numkeys, *keys, *args)
        if isinstance(target, RedisCluster):
            try:
                return target.evalsha(script.sha, numkeys, *keys, *args)
            except NoScriptError:
                self._load_on_node_of(keys[0], script)
                return target.evalsha(script.sha, numkeys, *keys, *args)
        return script(keys=list(keys), args=list(args), client=target)

    def _load_on_node_of(self, key: str, script: Script) -> None:
        """Load ``script`` on the cluster node that serves ``key``'s slot."""
        cluster: Any = self._client
        node = cluster.get_node_from_key(key)
        cluster.execute_command("SCRIPT LOAD", script.script, target_nodes=node)

    def pipelined(self, name: str, keys: Sequence[str], args: Sequence[Any], pipe: Any) -> None:
        """Queue operation ``name`` on ``pipe`` as a bare EVALSHA.

        Running a :class:`Script` on a pipeline makes redis-py send a
        ``SCRIPT EXISTS`` round trip before the pipeline; this does not. After a
        ``SCRIPT FLUSH`` the call's reply is a ``NoScriptError`` (it did not
        run): the caller runs it again through ``__call__``, which loads it.
        """
        numkeys, script = self._scripts[name]
        if len(keys) != numkeys:
            raise ScriptError(f"{name} takes {numkeys} keys, got {len(keys)}")
        # execute_command, not pipe.evalsha(): a cluster pipeline refuses the latter.
        pipe.execute_command("EVALSHA", script.sha, numkeys, *keys, *args)
