"""Every upstream task-contract test is accounted for (``ledger.py``): run
unedited, ported under its name to ``tests/contract/``, or not applicable with a
reason. The names are read from the fetched upstream files themselves, so a test
added upstream (or a new Django's) fails here until the ledger says where it
stands."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import django
import pytest

from . import ledger, test_django_tasks
from .fetch import Upstream, every

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "tests" / "contract"
COMPATIBILITY = ROOT / "docs" / "compatibility.md"


def upstream_files() -> dict[str, Path]:
    """Ledger name (``django/test_tasks.py``) -> the fetched file."""
    found: dict[str, Path] = {}
    for upstream in every():
        if not upstream.fetched():
            pytest.fail(f"{upstream.top} is not fetched: run `python -m tests.upstream.fetch`")
        for path in sorted((upstream.root / upstream.folder).glob("test*.py")):
            found[f"{upstream.name}/{path.name}"] = path
    return found


def _test_names(tree: ast.Module) -> list[tuple[str, str]]:
    """(class, test) for every ``test*`` method of every class in the module."""
    return [
        (node.name, item.name)
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test")
    ]


def upstream_tests() -> list[tuple[str, str, str]]:
    return [
        (source, cls, name)
        for source, path in upstream_files().items()
        for cls, name in _test_names(ast.parse(path.read_text()))
    ]


def contract_tests(module: str) -> set[str]:
    tree = ast.parse((CONTRACT / module).read_text())
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }


def test_the_ledger_sources_are_the_fetched_files() -> None:
    assert set(ledger.LEDGER) == set(upstream_files())


def test_every_upstream_test_has_a_verdict() -> None:
    missing = [t for t in upstream_tests() if ledger.verdict(*t) is None]
    assert missing == [], "add these to tests/upstream/ledger.py"


def test_no_verdict_names_a_test_upstream_has_not() -> None:
    known = {(source, cls) for source, cls, _ in upstream_tests()}
    tests = set(upstream_tests())
    stale = []
    for source, classes in ledger.LEDGER.items():
        for cls, verdicts in classes.items():
            if ledger.SINCE.get((source, cls), (0, 0)) > django.VERSION[:2]:
                continue  # a class of a newer Django's tests
            for name in verdicts:
                if (source, cls) not in known or (name != "*" and (source, cls, name) not in tests):
                    stale.append((source, cls, name))
    assert stale == []


def test_ported_tests_exist_under_their_names() -> None:
    absent = []
    for source, cls, name in upstream_tests():
        found = ledger.verdict(source, cls, name)
        if isinstance(found, ledger.Ported) and (found.name or name) not in contract_tests(
            found.module
        ):
            absent.append((source, cls, name, found))
    assert absent == []


def test_verbatim_verdicts_are_the_tests_run_unedited() -> None:
    """A Verbatim or Fails verdict only where test_django_tasks.py runs that
    class; it runs every class of those files but those not applicable."""
    run = {
        (source, cls)
        for source in ledger.VERBATIM_SOURCES
        for cls, verdicts in ledger.LEDGER[source].items()
        if not isinstance(verdicts.get("*"), ledger.NotApplicable)
    }
    for source, cls, name in upstream_tests():
        found = ledger.verdict(source, cls, name)
        if isinstance(found, ledger.Verbatim | ledger.Fails):
            assert (source, cls) in run, (source, cls, name)
    for _, cls in run:
        assert hasattr(test_django_tasks, cls), f"test_django_tasks.py does not run {cls}"


def test_every_expected_failure_is_documented() -> None:
    """Each test run unedited that fails on purpose is named in
    docs/compatibility.md under the section its verdict gives."""
    text = COMPATIBILITY.read_text()
    headings = {m.group(1).strip() for m in re.finditer(r"^#+ (.+)$", text, re.M)}
    for source in ledger.VERBATIM_SOURCES:
        for verdicts in ledger.LEDGER[source].values():
            for name, found in verdicts.items():
                if isinstance(found, ledger.Fails):
                    assert found.section in headings, found
                    assert f"`{name}`" in _section(text, ledger.RUN_UNEDITED), name


def _section(text: str, heading: str) -> str:
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_pins_cover_what_is_fetched() -> None:
    for upstream in every():
        assert isinstance(upstream, Upstream)
        assert re.fullmatch(r"[0-9a-f]{64}", upstream.sha256)
