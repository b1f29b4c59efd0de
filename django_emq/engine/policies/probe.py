"""The Lua probe list, generated from the registry.

The hot paths ask once per call whether any lane policy is in use: one
``EXISTS`` over every policy's probe hashes (``lua/includes/policies_off.lua``),
and none of them runs a policy command when none exists. The hashes are
``POLICY_HASHES`` in ``lua/includes/check.lua``, a line this module writes
from :data:`~. POLICIES` (``python -m django_emq.engine.policies.probe``);
``tests/test_policy_registry.py`` fails when the line is out of date.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ..keys import QueueKeys
from . import POLICIES

#: The file that holds the list, and the line's pattern.
CHECK_LUA = Path(__file__).resolve().parent.parent / "lua" / "includes" / "check.lua"
LINE_RE = re.compile(r"^local POLICY_HASHES = \{.*\}$", re.MULTILINE)


def probe_hashes() -> list[str]:
    """Every policy's probe hashes, as key names after the queue's prefix."""
    keys = QueueKeys("q")
    return [
        getattr(keys, attr).removeprefix(keys.prefix)
        for policy in POLICIES
        for attr in policy.probe
    ]


def probe_line() -> str:
    """The ``POLICY_HASHES`` line of ``check.lua``."""
    names = ", ".join(f"'{name}'" for name in probe_hashes())
    return f"local POLICY_HASHES = {{{names}}}"


def written(text: str) -> str:
    """``text`` (``check.lua``) with its ``POLICY_HASHES`` line generated."""
    if len(LINE_RE.findall(text)) != 1:
        raise ValueError(f"{CHECK_LUA} must hold one 'local POLICY_HASHES = {{...}}' line")
    return LINE_RE.sub(probe_line(), text)


def main() -> int:
    """Rewrite the line in place; prints whether it changed."""
    before = CHECK_LUA.read_text()
    after = written(before)
    if after != before:
        CHECK_LUA.write_text(after)
    print(f"{CHECK_LUA}: {'written' if after != before else 'up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
