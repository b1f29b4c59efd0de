"""Reads the Lua scripts in ``django_emq/engine/lua/``.

Every ``<name>-<numkeys>.lua`` file in the folder is one operation; it is
registered by scanning the folder (no hand-kept list). A line
``-- @include "helper"`` pulls in ``lua/includes/helper.lua`` once; includes
may include others; a cycle is an error.

Each operation is also built into one Valkey (and Redis >= 7) Function
library, :func:`library`: every include defined once at library level, each
operation's body wrapped as a function ``emq_<hash>_<operation>(KEYS, ARGV)``
(flagged ``no-writes`` when it only reads), the hash being that of the
library's source, so two releases' libraries live side by side during a
rolling deploy. The operation files stay as they are written (``KEYS`` and
``ARGV`` inside a body are the wrapper's arguments). What an include keeps
for one call (a top-level ``local`` declared ``nil`` or ``{}``, or assigned
anywhere: a memo table, a clock read once) is set afresh at the start of
every call, from the include's own initializer, so nothing leaks from one
call to the next; constants (a number, a table of literals only ever read)
are built once, with the library. Lua 5.1's limits are checked as the
library is built: at most 200 locals in its chunk (one per include function
and declaration), at most 60 upvalues in a function (a wrapper's: the
library-level names its body uses; the state is reset by functions of
:data:`RESET_CHUNK` declarations each). Running them (FCALL, or EVALSHA
where the server has no Functions; loading after a flush or restart; on a
cluster the node of the call's slot) is the runners' part:
:mod:`django_emq.engine.runner`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from .exceptions import ScriptError

INCLUDE_RE = re.compile(r'^--\s*@include\s+"([a-z_]+)"\s*$', re.MULTILINE)
NAME_RE = re.compile(r"([a-z_]+)-(\d+)\.lua")
#: A library-level declaration that is not a function (an include's constants and
#: per-call state), at the start of a line.
STATE_RE = re.compile(r"^local\s+(?!function\b)([A-Za-z_][\w\s,]*?)\s*(?:=\s*(.*))?$")
#: Lua 5.1's most locals in one function (the library's chunk holds one per
#: include function and per declaration) and most upvalues of one function (a
#: wrapper's: the library-level names its body uses).
MAX_LOCALS = 200
MAX_UPVALUES = 60
#: A command a script names: ``redis.call('CMD'``, or through check.lua's
#: ``guard(key, 'CMD'`` or the doctor's ``read('CMD'`` (both forward to
#: ``redis.pcall(...)``, the one call that names no command itself).
CALL_RE = re.compile(r"(?:redis\.p?call\(|\bguard\([^,()]+,|\bread\()\s*'([A-Za-z]+)'")
UNNAMED_CALL_RE = re.compile(r"redis\.p?call\((?!\s*'|\.\.\.\))")
#: Commands that write nothing: an operation that calls only these is registered
#: ``no-writes``, so it still answers while the server refuses writes
#: (``maxmemory`` reached), as a read by ``EVALSHA`` does.
READS = frozenset(
    {
        *("type", "exists", "time", "scan", "hscan", "sscan", "zscan"),
        *("hget", "hmget", "hgetall", "hlen", "hexists"),
        *("zscore", "zmscore", "zrange", "zrangebyscore", "zrevrange", "zcard", "zrank"),
        *("zcount", "lrange", "llen", "lindex", "sismember", "smismember", "scard", "smembers"),
    }
)
#: How many state declarations one reset function sets (each name is one of its
#: upvalues, and so may be each name its initializer reads).
RESET_CHUNK = 12


@dataclass(frozen=True, slots=True)
class LuaSource:
    """One operation's expanded source and its declared key count."""

    name: str
    numkeys: int
    source: str


@dataclass(frozen=True, slots=True)
class Library:
    """Every operation as one Function library: ``name`` (``emq_<hash>``) and the
    ``FUNCTION LOAD`` text."""

    name: str
    source: str

    def function(self, operation: str) -> str:
        """The name ``operation`` is registered under (function names are one
        namespace across libraries, so it carries the library's)."""
        return f"{self.name}_{operation}"


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


def _operations() -> list[tuple[str, int, str]]:
    """Each operation file's name, key count and text, in name order."""
    folder = resources.files("django_emq.engine") / "lua"
    found: dict[str, tuple[str, int, str]] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".lua"):
            continue
        match = NAME_RE.fullmatch(entry.name)
        if not match:
            raise ScriptError(f"{entry.name}: a script is named <operation>-<numkeys>.lua")
        name = match.group(1)
        if name in found:
            raise ScriptError(f"two scripts for operation {name!r}")
        found[name] = (name, int(match.group(2)), entry.read_text())
    return list(found.values())


@cache
def sources() -> dict[str, LuaSource]:
    """Every operation in the package's ``lua`` folder, includes expanded."""
    folder = resources.files("django_emq.engine") / "lua"
    return {
        name: LuaSource(name, numkeys, _expand(text, folder, set(), (name,)))
        for name, numkeys, text in _operations()
    }


@cache
def library() -> Library:
    """Every operation as one Function library (see the module's docstring)."""
    folder = resources.files("django_emq.engine") / "lua"
    seen: set[str] = set()
    helpers: list[str] = []
    bodies: list[tuple[str, str]] = []
    for name, _, text in _operations():
        for included in INCLUDE_RE.findall(text):
            helpers.append(_expand(f'-- @include "{included}"', folder, seen, (name,)))
        bodies.append((name, INCLUDE_RE.sub(lambda m: f"-- (library level: {m.group(1)})", text)))
    shared = "\n".join(helpers)
    names = _library_names(shared)
    parts = [shared, *_resets(shared, [body for _, body in bodies])]
    for name, body in bodies:
        used = names & set(re.findall(r"[A-Za-z_]\w*", _code(body)))
        if len(used) + 1 >= MAX_UPVALUES:
            raise ScriptError(
                f"{name} uses {len(used)} library-level names: Lua allows "
                f"{MAX_UPVALUES} upvalues in one function"
            )
        flags = ", flags = {'no-writes'}" if _reads_only(sources()[name].source) else ""
        parts.append(
            f"redis.register_function{{function_name = '@FN_{name}',\n"
            f"callback = function(KEYS, ARGV)\nemqFresh()\n{body}\nend{flags}}}"
        )
    text = "\n".join(parts) + "\n"
    lib = "emq_" + hashlib.sha1(text.encode()).hexdigest()[:12]
    text = text.replace("'@FN_", f"'{lib}_")
    return Library(lib, f"#!lua name={lib}\n{text}")


def _reads_only(source: str) -> bool:
    """``source`` (an operation, includes expanded) names only commands in
    :data:`READS` and calls none it does not name."""
    code = _code(source)
    named = {command.lower() for command in CALL_RE.findall(code)}
    return named <= READS and not UNNAMED_CALL_RE.search(code)


def _code(text: str) -> str:
    """``text`` without its comments (strings kept; good enough for names)."""
    text = re.sub(r"--\[(=*)\[.*?\]\1\]", "", text, flags=re.DOTALL)
    return re.sub(r"--[^\n]*", "", text)


def _declarations(shared: str) -> list[tuple[str, str]]:
    """Each library-level declaration that is not a function: its names (``a``,
    or ``a, b``) and its initializer (``nil`` when it has none), read from the
    lines that start with ``local`` (a multi-line initializer runs until its
    brackets close)."""
    found: list[tuple[str, str]] = []
    lines = _code(shared).split("\n")
    i = 0
    while i < len(lines):
        match = STATE_RE.match(lines[i])
        i += 1
        if not match:
            continue
        init = [match.group(2) or "nil"]
        while _depth(" ".join(init)) > 0 and i < len(lines):
            init.append(lines[i])
            i += 1
        found.append((re.sub(r"\s+", " ", match.group(1).strip()), "\n".join(init).strip()))
    return found


def _depth(text: str) -> int:
    """Brackets opened and not yet closed in ``text`` (outside its strings)."""
    text = re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", "''", text)
    return sum(text.count(c) for c in "({[") - sum(text.count(c) for c in ")}]")


def _library_names(shared: str) -> set[str]:
    """Every name the library's chunk declares; ``ScriptError`` past Lua's limit."""
    names = set(re.findall(r"^local function (\w+)", shared, re.MULTILINE))
    for declared, _ in _declarations(shared):
        names |= {n.strip() for n in declared.split(",")}
    if len(names) + RESET_CHUNK >= MAX_LOCALS:
        raise ScriptError(
            f"the library declares {len(names)} names at its top level: "
            f"Lua allows {MAX_LOCALS} locals in one function"
        )
    return names


def _state(declarations: list[tuple[str, str]], code: str) -> list[tuple[str, str]]:
    """The declarations that hold per-call state: all but the constants, those
    built of literals alone (numbers, strings, tables of them) whose names are
    never assigned to, nor into (``x =``, ``x[k] =``, ``x.f =``,
    ``table.insert(x, ...)``), after their declaration. A constant is built
    once, with the library; a table a call changes through another name must
    be declared empty (``{}``) to be set afresh."""
    state = []
    for names, init in declarations:
        literal = re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\b\w+\s*=(?!=)", "", init)
        constant = not re.fullmatch(r"nil|\{\s*\}", init) and set(
            re.findall(r"\b[A-Za-z_]\w*", literal)
        ) <= {"true", "false"}
        rest = re.sub(rf"^local\s+{re.escape(names)}\s*=", "", code, flags=re.MULTILINE)
        for name in (n.strip() for n in names.split(",")):
            target = rf"(?<![\w.]){name}\s*(?:\[.*?\]|\.\w+)*\s*=(?!=)"
            changed = rf"\btable\.(?:insert|remove|sort)\(\s*{name}\b"
            if re.search(target, rest) or re.search(changed, rest):
                constant = False
        if not constant:
            state.append((names, init))
    return state


def _resets(shared: str, bodies: list[str]) -> list[str]:
    """``emqFresh()``: the initializer of every declaration that holds per-call
    state (:func:`_state`) run again, so that state starts afresh on every
    call, in functions of :data:`RESET_CHUNK` declarations, each well under
    Lua's upvalue limit."""
    state = _state(_declarations(shared), _code("\n".join([shared, *bodies])))
    chunks = [state[i : i + RESET_CHUNK] for i in range(0, len(state), RESET_CHUNK)]
    parts = []
    for n, chunk in enumerate(chunks):
        sets = "\n".join(f"  {names} = {init}" for names, init in chunk)
        parts.append(f"local function emqFresh{n}()\n{sets}\nend")
    calls = "\n".join(f"  emqFresh{n}()" for n in range(len(chunks)))
    parts.append(f"local function emqFresh()\n{calls}\nend")
    return parts
