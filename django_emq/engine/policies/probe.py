"""The Lua probe list, generated from the registry.

The hot paths ask once per call which lane policies are in use: one read of
the policy index's ``*`` field (``lua/includes/policies_off.lua``), which
holds a letter for each policy hash that holds a field; a lane's own field
holds the letters of the per-lane settings it has. The hashes, their letters
and whether their fields are lanes' are ``POLICY_HASHES`` in
``lua/includes/check.lua`` (and ``POLICY_LETTER``, each hash's letter by
its name, and ``POLICY_ALIEN``, the pattern of a character that is no
letter: a field holding one is read as unknown), lines this module writes
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
LETTER_RE = re.compile(r"^local POLICY_LETTER = \{.*\}$", re.MULTILINE)
ALIEN_RE = re.compile(r"^local POLICY_ALIEN = '.*'$", re.MULTILINE)


def probe_hashes() -> list[tuple[str, str, bool]]:
    """Every policy's probe hashes: (key name after the queue's prefix, its
    letter, whether its fields are lanes' own settings), in registry order."""
    keys = QueueKeys("q")
    return [
        (getattr(keys, attr).removeprefix(keys.prefix), letter, attr in policy.per_lane)
        for policy in POLICIES
        for attr, letter in policy.probe.items()
    ]


def probe_line() -> str:
    """The ``POLICY_HASHES`` line of ``check.lua``."""
    entries = ", ".join(
        f"{{'{name}', '{letter}', {'true' if lanes else 'false'}}}"
        for name, letter, lanes in probe_hashes()
    )
    return f"local POLICY_HASHES = {{{entries}}}"


def letter_line() -> str:
    """The ``POLICY_LETTER`` line of ``check.lua``: each probe hash's letter."""
    entries = ", ".join(f"{name} = '{letter}'" for name, letter, _ in probe_hashes())
    return f"local POLICY_LETTER = {{{entries}}}"


def alien_line() -> str:
    """The ``POLICY_ALIEN`` line of ``check.lua``: a Lua pattern matching any
    character that is not a probe hash's letter (a hand-edited index field)."""
    letters = "".join(letter for _, letter, _ in probe_hashes())
    return f"local POLICY_ALIEN = '[^{letters}]'"


def written(text: str) -> str:
    """``text`` (``check.lua``) with its ``POLICY_HASHES``, ``POLICY_LETTER``
    and ``POLICY_ALIEN`` lines generated."""
    lines = (
        ("POLICY_HASHES", LINE_RE, probe_line()),
        ("POLICY_LETTER", LETTER_RE, letter_line()),
        ("POLICY_ALIEN", ALIEN_RE, alien_line()),
    )
    for name, line_re, _ in lines:
        if len(line_re.findall(text)) != 1:
            raise ValueError(f"{CHECK_LUA} must hold one 'local {name} = ...' line")
    for _, line_re, line in lines:
        text = line_re.sub(line, text)
    return text


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
