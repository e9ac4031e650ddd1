"""Argparse types shared by the commands: a bad count or language code is refused with exit 2
before any work, in argparse's own words."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of ``minimum`` or more (a negative --limit-queries once cut
    the last query off, as Python's slicing does)."""

    def parse(text: str) -> int:
        value = int(text)  # not a number: argparse says "invalid int value"
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, got {value}")
        return value

    parse.__name__ = "int"
    return parse


def language_code(text: str) -> str:
    """An argparse type for --query-lang: an ISO 639 code, lower case (``--query-lang english`` was
    taken as a language no component reads, and linked by the cross-lingual variant)."""
    code = text.strip().lower()
    if not re.fullmatch(r"[a-z]{2,3}", code):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a language code: two or three letters (ISO 639), e.g. en, de, pt"
        )
    return code
