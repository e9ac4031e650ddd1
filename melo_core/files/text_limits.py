"""What a stored or linked text may hold: one length limit and one character rule, checked in one
place for every import, the store (SQLite and PostgreSQL alike) and ``link --input``.

- Titles and labels (a term's label, a concept label, a job title): at most ``MAX_LABEL``
  characters, no control characters (a line break in a title is most often a quote left open).
- Descriptions: at most ``MAX_DESCRIPTION`` characters; line breaks and tabs allowed.
- Names of people (curators, reviewers, authors): NFC-normalised, at most ``MAX_NAME``
  characters, no control, format (Unicode category Cf: zero-width spaces, bidi overrides) or
  other invisible characters, so ``alice`` and ``alice\\u200b`` cannot be two people and
  ``\\u202ecilA`` cannot display as ``Alice``.
- Identifiers (codes, URIs, scheme names, versions): at most their column's width, no control
  characters (``db.models.Bounded`` checks each column with ``check_text``).

Each check returns the cleaned value or raises ``ValueError`` with a message fit for one line.
"""

from __future__ import annotations

import unicodedata

MAX_LABEL = 1000  # a job title is well under 200 characters
MAX_DESCRIPTION = 20_000
MAX_NAME = 200
MAX_CODE = 500  # a source term's code, as db/models.py's column holds it

_LINE_BREAKS_AND_TABS = frozenset("\n\r\t")


def _shown(value: str) -> str:
    start = value[:40] + ("…" if len(value) > 40 else "")
    return repr(start)


def first_control(value: str, *, allow: frozenset[str] = frozenset()) -> str | None:
    """The first control character (Unicode category Cc) of ``value`` not in ``allow``, or None."""
    for char in value:
        if char not in allow and unicodedata.category(char) == "Cc":
            return char
    return None


def check_text(value: str, what: str, *, max_length: int = MAX_LABEL, multiline: bool = False) -> str:
    """``value`` if it fits: at most ``max_length`` characters and no control characters (line
    breaks and tabs allowed when ``multiline``)."""
    if len(value) > max_length:
        raise ValueError(f"{what} longer than {max_length} characters ({len(value)}: {_shown(value)})")
    bad = first_control(value, allow=_LINE_BREAKS_AND_TABS if multiline else frozenset())
    if bad is not None:
        kind = "line break" if bad in "\n\r" else f"control character U+{ord(bad):04X}"
        raise ValueError(f"{what} holds a {kind} ({_shown(value)})")
    return value


def check_label(value: str, what: str = "label") -> str:
    return check_text(value, what, max_length=MAX_LABEL)


def check_description(value: str, what: str = "description") -> str:
    return check_text(value, what, max_length=MAX_DESCRIPTION, multiline=True)


def check_name(value: str, what: str = "name") -> str:
    """A person's name, NFC-normalised; control, format (Cf) and other invisible characters refused."""
    name = unicodedata.normalize("NFC", value)
    if not name.strip():
        raise ValueError(f"{what} is empty")
    if len(name) > MAX_NAME:
        raise ValueError(f"{what} longer than {MAX_NAME} characters ({len(name)}: {_shown(name)})")
    for char in name:
        category = unicodedata.category(char)
        if category in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            raise ValueError(
                f"{what} {_shown(name)} holds an invisible or direction-changing character U+{ord(char):04X}"
                f" ({unicodedata.name(char, 'unnamed')})"
            )
    return name
