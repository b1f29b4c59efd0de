"""The Lua helpers' layout: one ``local function`` per include file, named for
it, and every script pulling in only what it calls, so a script carries (and
builds on every call) only the helpers it runs. A module's overview and shared
state (``check.lua``, ``tenants.lua``, ...) live in a file of their own."""

from __future__ import annotations

import re
from importlib import resources

FOLDER = resources.files("django_emq.engine") / "lua"
FUNCTION_RE = re.compile(r"^local function (\w+)", re.MULTILINE)
INCLUDE_RE = re.compile(r'^--\s*@include\s+"([a-z_]+)"\s*$', re.MULTILINE)


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def code_of(text: str) -> str:
    """``text`` without its comments."""
    text = re.sub(r"--\[(=*)\[.*?\]\1\]", "", text, flags=re.DOTALL)
    return re.sub(r"--[^\n]*", "", text)


def includes() -> dict[str, str]:
    return {
        entry.name.removesuffix(".lua"): entry.read_text()
        for entry in (FOLDER / "includes").iterdir()
        if entry.name.endswith(".lua")
    }


def test_an_include_holds_one_function_named_for_its_file() -> None:
    for name, text in includes().items():
        functions = FUNCTION_RE.findall(text)
        assert len(functions) <= 1, f"{name}.lua defines {functions}: one function per file"
        if functions:
            assert snake(functions[0]) == name, f"{name}.lua defines {functions[0]}"


def test_every_included_function_is_called_where_it_is_included() -> None:
    """No script or helper carries a helper it does not call (a module file,
    which holds state and no function, is included for its names)."""
    helpers = includes()
    defined = {name: FUNCTION_RE.findall(text) for name, text in helpers.items()}
    files = {f"includes/{name}": text for name, text in helpers.items()}
    files |= {e.name: e.read_text() for e in FOLDER.iterdir() if e.name.endswith(".lua")}
    for where, text in files.items():
        code = code_of(text)
        for included in INCLUDE_RE.findall(text):
            for function in defined[included]:
                called = re.search(r"(?<![.:\w])" + function + r"\s*\(", code)
                assert called, f"{where} includes {included} but never calls {function}"
