"""What the embedded-server commands (``emq_valkey_status``, ``emq_valkey_stop``)
share: which folder's server they act on, and why none when the settings point
at a server django-emq does not run."""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from django_emq import embedded
from django_emq.conf import emq_settings
from django_emq.exceptions import ConfigurationError
from django_emq.url import redact


def add_dir_argument(parser: ArgumentParser) -> None:
    """``--dir``: a folder of an embedded server, whatever the settings say."""
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="the embedded server's folder (default: EMQ['EMBEDDED_DIR'], "
        "when the settings use the embedded server)",
    )


def embedded_dir(options: dict[str, Any], doing: str) -> Path:
    """The folder whose server to act on: ``--dir``, else the settings' own when
    they use the embedded server. ``CommandError`` saying why otherwise (and
    naming a leftover embedded server under the default folder, if one runs)."""
    if options.get("dir") is not None:
        return Path(options["dir"]).resolve()
    try:
        conf = emq_settings()
    except ConfigurationError as exc:  # a bad setting must not hide the server
        raise CommandError(f"{exc}; --dir <folder> names an embedded server's folder") from None
    if conf.embedded:
        return conf.embedded_dir.resolve()
    if conf.url is not None:
        why = (
            f"EMQ['URL'] (or $EMQ_URL) points at {redact(conf.url)}, a server "
            f"django-emq does not run: {doing} it with the tools of its host"
        )
    else:
        why = "the settings use no embedded server (DEBUG is off and no URL is set)"
    if embedded.is_running(conf.embedded_dir):
        why += (
            f". An embedded server still runs under {conf.embedded_dir}: "
            f"--dir {conf.embedded_dir} names it"
        )
    raise CommandError(why)


def size(count: int) -> str:
    """``count`` bytes for a person: ``1.0 MiB``."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
