"""The rules: a secret code of digits; a guess scores bulls and cows.

A *bull* is a right digit in the right place; a *cow* a right digit in the
wrong place (each digit of the secret counts once). Four bulls crack the code.
"""

from __future__ import annotations

import secrets
from collections import Counter

#: Digits in a code.
CODE_LENGTH = 4


def new_secret() -> str:
    """A fresh random code, e.g. ``"0427"``."""
    return "".join(secrets.choice("0123456789") for _ in range(CODE_LENGTH))


def validate_code(code: str) -> str:
    """``code`` stripped, or ``ValueError`` unless it is exactly ``CODE_LENGTH`` digits."""
    code = code.strip()
    if len(code) != CODE_LENGTH or not code.isascii() or not code.isdigit():
        raise ValueError(f"a guess is {CODE_LENGTH} digits, like 0427")
    return code


def score(secret: str, guess: str) -> tuple[int, int]:
    """(bulls, cows) of ``guess`` against ``secret``."""
    bulls = sum(s == g for s, g in zip(secret, guess, strict=True))
    common = sum((Counter(secret) & Counter(guess)).values())
    return bulls, common - bulls
