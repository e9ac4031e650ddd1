"""Argparse types shared by the commands: a bad count or language code is refused with exit 2
before any work, in argparse's own words."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Callable, Sequence


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


def parse_command_line(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """``parser.parse_args``, but an option no command has is refused by the command it was given
    to, with its usage and the nearest option it has (``link --top-k 5``: "unrecognized arguments:
    --top-k 5 (did you mean --top?)"). Argparse's own refusal came from the top parser, with the
    usage of ``python -m melo_core COMMAND ...``, which names no option of ``link``."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = _innermost(parser, args)
        options = [o for action in command._actions for o in action.option_strings if o.startswith("--")]
        near = {
            given: found[0]
            for given in unknown
            if given.startswith("--")
            and (found := difflib.get_close_matches(given.split("=", 1)[0], options, n=1, cutoff=0.6))
        }
        hint = ", ".join(option if len(near) == 1 else f"{option} for {given}" for given, option in near.items())
        command.error(f"unrecognized arguments: {' '.join(unknown)}" + (f" (did you mean {hint}?)" if hint else ""))
    return args


def _innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command ``args`` chose: `users add` rather than `users`, `users` rather than the top."""
    while True:
        chooser = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        chosen = getattr(args, chooser.dest, None) if chooser else None
        if chooser is None or chosen not in chooser.choices:
            return parser
        parser = chooser.choices[chosen]
