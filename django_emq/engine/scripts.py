"""Reads the Lua scripts in ``django_emq/engine/lua/``.

Every ``<name>-<numkeys>.lua`` file in the folder is one operation; it is
registered by scanning the folder (no hand-kept list). A line
``-- @include "helper"`` pulls in ``lua/includes/helper.lua`` once; includes
may include others; a cycle is an error. Running them (EVALSHA, loading
after a ``SCRIPT FLUSH``, on a cluster the node of the call's slot) is the
runners' part: :mod:`django_emq.engine.runner`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from .exceptions import ScriptError

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
