"""Where names are imported from: the engine's public names from
``django_emq.engine`` (the one path docs/engine.md shows; its example runs),
every import the docs show resolves, no module only re-exports another, and bench's modules
import each other round no circle.

``tests/test_layers.py`` checks the layers of ``django_emq`` and their circles.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import django_emq.engine
from django_emq.engine import exceptions as engine_exceptions

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "django_emq" / "engine"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: A fenced Python block of a Markdown page, indented or not (inside a list item).
PYTHON_BLOCK = re.compile(r"^([ \t]*)```python\n(.*?)^\1```", re.MULTILINE | re.DOTALL)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def python_blocks(page: Path) -> Iterator[ast.Module]:
    for match in PYTHON_BLOCK.finditer(page.read_text()):
        yield ast.parse(textwrap.dedent(match.group(2)), filename=str(page))


def django_emq_imports(tree: ast.AST) -> Iterator[tuple[str, list[str]]]:
    """(module, names) of every ``from django_emq... import names`` in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("django_emq"):
            yield node.module or "", [alias.name for alias in node.names]


# -- the engine's public names -------------------------------------------------------


def test_docs_engine_imports_only_from_the_engine() -> None:
    page = ROOT / "docs" / "engine.md"
    imports = [found for tree in python_blocks(page) for found in django_emq_imports(tree)]
    assert imports, "docs/engine.md shows the import"
    public = set(django_emq.engine.__all__)
    assert [(module, names) for module, names in imports if module != "django_emq.engine"] == []
    assert [name for _, names in imports for name in names if name not in public] == []
    # Names in the text too: the package itself, a name it exports, or get_queue.
    allowed = {"django_emq.engine", "django_emq.get_queue"}
    allowed |= {f"django_emq.engine.{name}" for name in public}
    dotted = set(re.findall(r"django_emq(?:\.\w+)+", page.read_text()))
    assert dotted - allowed == set()


def test_the_engine_page_example_runs(r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example at the top of docs/engine.md, as written, on the test server."""
    (example, *_) = python_blocks(ROOT / "docs" / "engine.md")
    monkeypatch.setattr(redis, "Redis", lambda: r)
    names: dict[str, Any] = {}
    exec(compile(example, "docs/engine.md", "exec"), names)
    row = names["queue"].job(names["claim"].job_id)
    assert (row["state"], row["result"]) == ("done", "84")


def test_the_engine_exports_every_exception_it_raises() -> None:
    raised = {
        name
        for name, value in vars(engine_exceptions).items()
        if isinstance(value, type)
        and issubclass(value, engine_exceptions.EMQError)
        and not name.startswith("_")
    }
    assert raised - set(django_emq.engine.__all__) == set()


def test_every_engine_module_imports_first_alone_without_django() -> None:
    """Each engine module imported into a fresh interpreter state, Django blocked:
    a module that reached back into ``django_emq.engine`` before the package had
    finished importing would fail here."""
    code = textwrap.dedent(
        """
        import importlib, pkgutil, sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "django" or name.startswith("django."):
                    raise ImportError("django is blocked: " + name)

        sys.meta_path.insert(0, Block())
        import django_emq.engine as engine
        names = [m.name for m in pkgutil.walk_packages(engine.__path__, "django_emq.engine.")]
        for name in ["django_emq.engine", *names]:
            for loaded in [m for m in sys.modules if m.startswith("django_emq")]:
                del sys.modules[loaded]
            importlib.import_module(name)
        from django_emq.engine import *
        assert not any(n == "django" or n.startswith("django.") for n in sys.modules)
        print(len(names))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 10


def test_no_engine_module_imports_from_its_own_package() -> None:
    """``from . import calls`` (a sibling) is fine; ``from . import Queue`` (a name
    the package's ``__init__`` re-exports) would make a circle."""
    found: list[str] = []
    for path in ENGINE.rglob("*.py"):
        if path.name == "__init__.py":
            continue
        package = module_name(path).rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target != "django_emq.engine":
                continue
            for alias in node.names:
                sibling = ENGINE / alias.name
                if not (sibling.with_suffix(".py").exists() or sibling.is_dir()):
                    found.append(f"{module_name(path)}: {alias.name}")
    assert found == []


# -- the docs ---------------------------------------------------------------------------


def test_every_import_the_docs_show_resolves() -> None:
    missing: list[str] = []
    for page in DOCS:
        for tree in python_blocks(page):
            for module, names in django_emq_imports(tree):
                imported = importlib.import_module(module)
                for name in names:
                    if not hasattr(imported, name):
                        try:
                            importlib.import_module(f"{module}.{name}")
                        except ImportError:
                            missing.append(f"{page.relative_to(ROOT)}: {module}.{name}")
    assert missing == []


# -- the house ------------------------------------------------------------------------


def only_imports(tree: ast.Module) -> bool:
    """Whether a module does nothing but import (and list ``__all__``)."""
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return bool(body) and all(
        isinstance(node, ast.Import | ast.ImportFrom)
        or (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and ast.unparse(node.targets[0] if isinstance(node, ast.Assign) else node.target)
            == "__all__"
        )
        for node in body
    )


def sources_of(package: str) -> list[Path]:
    """``package``'s own modules: not what lives in a hidden folder under it (the
    peers' virtualenv ``bench/duel.py`` makes in ``bench/.venv-peers``)."""
    root = ROOT / package
    return sorted(
        path
        for path in root.rglob("*.py")
        if not any(part.startswith(".") for part in path.relative_to(root).parts)
    )


def test_no_module_only_re_exports_another() -> None:
    """A package's ``__init__`` may gather its parts' names (``django_emq.engine``);
    any other module that only imports is a second path to the same thing."""
    found = [
        str(path.relative_to(ROOT))
        for package in ("django_emq", "bench")
        for path in sources_of(package)
        if path.name != "__init__.py" and only_imports(ast.parse(path.read_text()))
    ]
    assert found == []


def import_graph(package: str) -> dict[str, set[str]]:
    """Which of ``package``'s modules each of them imports, wherever the import
    stands: under ``if TYPE_CHECKING:`` and inside functions too, since a type
    that must be imported both ways is a concept in the wrong module."""
    paths = {module_name(p): p for p in sources_of(package)}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        current = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = current.split(".")[: len(current.split(".")) - (node.level - 1)]
                    module = ".".join([*base, node.module] if node.module else base)
                else:
                    module = node.module or ""
                for alias in node.names:  # "from bench import io" imports a module
                    sub = f"{module}.{alias.name}"
                    targets.add(sub if sub in paths else module)
        graph[name] = {t for t in targets if t in paths and t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_circles_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_no_import_circle_in_bench() -> None:
    graph = import_graph("bench")
    assert "bench.io" in graph["bench.run"]
    assert circles(graph) == []
