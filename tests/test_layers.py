"""The house's floor plan: the engine imports no Django, layers import downwards
only, and no module imports itself back through another."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "django_emq"

#: Layer of each top-level part: a module may import its own layer or a lower one.
ENGINE, DJANGO, TOP = 0, 1, 2
TOP_PARTS = {"worker", "admin", "management"}


def layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] == "engine":
        return ENGINE
    if len(parts) > 1 and parts[1] in TOP_PARTS:
        return TOP
    return DJANGO


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, source: str | None = None) -> set[str]:
    """Every ``django_emq`` module ``path`` imports, wherever the import stands
    (inside a function, or under ``if TYPE_CHECKING:``: a module that needs
    another only to name its types still leans on it). ``from . import x``
    names module ``x`` alone when ``x`` is a module, not the package too.
    ``source``: the text to read in place of the file's."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("django_emq"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if not target.startswith("django_emq"):
                continue
            modules = {f"{target}.{a.name}" for a in node.names if is_module(f"{target}.{a.name}")}
            found |= modules
            if len(modules) < len(node.names):  # names defined in ``target`` itself
                found.add(target)
    return found - {name}


def is_module(dotted: str) -> bool:
    where = PACKAGE.parent / dotted.replace(".", "/")
    return where.is_dir() or where.with_suffix(".py").is_file()


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in PACKAGE.rglob("*.py")}


def test_engine_imports_without_django() -> None:
    code = (
        "import sys, importlib, pkgutil\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'django' or name.startswith('django.'):\n"
        "            raise ImportError('django is blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import django_emq.engine as e\n"
        "for m in pkgutil.iter_modules(e.__path__):\n"
        "    importlib.import_module('django_emq.engine.' + m.name)\n"
        "assert not any(n == 'django' or n.startswith('django.') for n in sys.modules)\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_no_import_runs_up_a_layer() -> None:
    upward = [
        f"{src} -> {dst}"
        for src, targets in graph().items()
        for dst in targets
        if layer(dst) > layer(src)
    ]
    assert upward == []


def test_no_import_circle() -> None:
    """No module leans on itself through others: not at run time, not for its
    types alone (a part that needs the whole's types takes a Protocol from a
    lower module instead), and no part through its package's ``__init__``."""
    edges = graph()
    circles: list[str] = []

    def visit(node: str, stack: list[str], done: set[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt in stack:
                circles.append(" -> ".join([*stack[stack.index(nxt) :], nxt]))
            elif nxt not in done:
                visit(nxt, [*stack, nxt], done)
        done.add(node)

    done: set[str] = set()
    for start in sorted(edges):
        if start not in done:
            visit(start, [start], done)
    assert circles == []


def test_the_circle_check_sees_imports_made_for_types_alone() -> None:
    """An import under ``if TYPE_CHECKING:`` is an edge of the graph (the
    engine's parts once imported ``queue`` so, and ``queue`` imports them)."""
    text = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .queue import Queue\n"
    assert "django_emq.engine.queue" in imports_of(PACKAGE / "engine" / "api.py", text)


def test_no_module_over_400_lines_and_no_class_over_300() -> None:
    """Small parts: a module holds one concept, a class one job."""
    long: list[str] = []
    for p in PACKAGE.rglob("*.py"):
        source = p.read_text()
        if (n := len(source.splitlines())) > 400:
            long.append(f"{p.relative_to(PACKAGE.parent)} ({n} lines)")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > 300:
                    long.append(f"{p.relative_to(PACKAGE.parent)}: class {node.name} ({size})")
    assert long == []
