"""Fetch the upstream task-contract tests: Django's ``tests/tasks`` (for the
installed Django) and the ``tests/tests.py`` of django-tasks-db and
django-tasks-rq, from their source distributions on PyPI.

``make test`` runs this before pytest (``python -m tests.upstream.fetch``). pip
downloads each sdist at a pinned version with ``--require-hashes`` (a sdist whose
sha256 is not the one below is refused), and the test files alone are unpacked
under ``tests/upstream/sources/`` (not in git). A second run finds them there
and downloads nothing. The tests in this folder read them from there, unedited.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import django

#: Where the unpacked upstream files live (``.gitignore`` names it).
SOURCES = Path(__file__).resolve().parent / "sources"

#: The sha256 of each pinned sdist, by PyPI name and version (``pip hash``).
#: Django's is the installed version's: add a line when a new Django is tested.
PINS: dict[tuple[str, str], str] = {
    ("django", "6.0.10"): "6005d030df924f85088454c18bd35dcf082b058aa355ad3df520d8de9aef9f41",
    ("django", "6.1.3"): "b5d2d9e35295065d13b1927b3f19a59bd119f737aa6299def14ccca1ae3c8c0d",
    ("django-tasks-db", "0.13.0"): (
        "09630d417cf722b07e1439b837403e18e86455908ba532fa6795b0d23dc3ff23"
    ),
    ("django-tasks-rq", "0.12.0"): (
        "84020a65d7b92d867f28d3002b4a6b07514eeda99b880ad91bb041d63e2191e0"
    ),
}

#: The versions of the reference backends whose tests are read.
TASKS_DB_VERSION = "0.13.0"
TASKS_RQ_VERSION = "0.12.0"


@dataclass(frozen=True)
class Upstream:
    """One pinned sdist and the folder of it whose ``.py`` files are kept."""

    name: str
    version: str
    #: The folder inside the sdist (below its top folder) holding the tests.
    folder: str

    @property
    def sha256(self) -> str:
        try:
            return PINS[(self.name, self.version)]
        except KeyError:
            raise SystemExit(
                f"{self.name} {self.version} has no pinned sha256 in tests/upstream/fetch.py "
                f"(PINS): add the hash of its sdist (pip download --no-deps --no-binary :all: "
                f"{self.name}=={self.version}; pip hash <file>)"
            ) from None

    @property
    def top(self) -> str:
        """The sdist's top folder (``django-6.1.3``, ``django_tasks_db-0.13.0``)."""
        return f"{self.name.replace('-', '_')}-{self.version}"

    @property
    def root(self) -> Path:
        """Where its unpacked tests live: ``root / folder``."""
        return SOURCES / self.top

    @property
    def stamp(self) -> Path:
        """Written last, holding the sdist's hash: present means complete."""
        return self.root / "SHA256"

    def fetched(self) -> bool:
        return self.stamp.is_file() and self.stamp.read_text().strip() == self.sha256


def django_tests() -> Upstream:
    """Django's ``tests/tasks`` of the installed Django."""
    return Upstream("django", django.__version__, "tests/tasks")


def tasks_db_tests() -> Upstream:
    return Upstream("django-tasks-db", TASKS_DB_VERSION, "tests")


def tasks_rq_tests() -> Upstream:
    return Upstream("django-tasks-rq", TASKS_RQ_VERSION, "tests")


def every() -> list[Upstream]:
    return [django_tests(), tasks_db_tests(), tasks_rq_tests()]


def _unpack(upstream: Upstream, archive: Path) -> None:
    """Keep the ``.py`` files of ``upstream.folder`` (not below it), then the stamp."""
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != upstream.sha256:  # pip checked it already; a second look costs nothing
        raise SystemExit(f"{archive.name}: sha256 {digest}, pinned {upstream.sha256}")
    prefix = f"{upstream.top}/{upstream.folder}/"
    target = upstream.root / upstream.folder
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        members = [
            m
            for m in tar.getmembers()
            if m.isfile()
            and m.name.startswith(prefix)
            and m.name.endswith(".py")
            and "/" not in m.name[len(prefix) :]
        ]
        if not members:
            raise SystemExit(f"{archive.name} holds no {prefix}*.py")
        for member in members:
            source = tar.extractfile(member)
            assert source is not None
            (target / Path(member.name).name).write_bytes(source.read())
    upstream.stamp.write_text(upstream.sha256 + "\n")


def fetch(upstreams: list[Upstream]) -> None:
    """Download the missing sdists with pip (hashes required) and unpack them."""
    missing = [u for u in upstreams if not u.fetched()]
    if not missing:
        return
    with tempfile.TemporaryDirectory(prefix="emq-upstream-") as folder:
        requirements = Path(folder) / "requirements.txt"
        requirements.write_text(
            "".join(f"{u.name}=={u.version} --hash=sha256:{u.sha256}\n" for u in missing)
        )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--require-hashes",
                "-r",
                str(requirements),
                "-d",
                folder,
            ],
            check=True,
        )
        for upstream in missing:
            _unpack(upstream, Path(folder) / f"{upstream.top}.tar.gz")
            print(f"upstream tests: {upstream.top} -> {upstream.root}")


if __name__ == "__main__":
    fetch(every())
