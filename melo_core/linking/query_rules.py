"""Query normalisation for titles as job ads write them: rules a pipeline names in its
``query_rules`` and the linker applies to every query before any scorer sees it.

Each rule is measured on the job-ad validation titles and on MELO (docs/experiments/query-rules.md;
a pipeline TOML naming the rule, run by an experiment file such as ``titles-seniority``) and a
pipeline keeps only those that do not lower the MELO mean. A rule that
would leave nothing returns the text it was given, so no query is ever emptied.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from melo_core.scorers.text import drop_gender_markers

_BRACKETS = re.compile(r"\s*[(\[{][^)\]}]*[)\]}]")
# A qualifier after a dash, bar or colon set off by spaces (or glued to a closing bracket):
# "Senior Accounts Payable - Korean Speaker", "Executive (Thai)-Fashion", "Sales | Remote".
_DASH_TAIL = re.compile(r"(?:\s+[-–—|:]\s+|(?<=\))\s*[-–—]\s*).*$")
_SENIORITY = re.compile(
    r"\b(?:senior|snr|sr|junior|jnr|jr|intern(?:ship)?|trainee(?:ship)?|graduate|fresh|entry[\s-]level|"
    r"part[\s-]time|full[\s-]time|temporary|temp|contract(?:or)?|freelance|permanent|urgent(?:ly)?|"
    r"vacancy\s+for|hiring|immediate(?:\s+start)?)\b\.?",
    re.IGNORECASE,
)
_GENDER_WORDS = re.compile(r"\b(?:male|female|lady|ladies|men|women)(?:\s+only)?\b", re.IGNORECASE)
_CODES = re.compile(r"(?:#|\bref\.?:?\s*)?\b[\w/-]*\d[\w/-]*\b", re.IGNORECASE)
_LEFTOVER = re.compile(r"^[\s,;:/&+|–—-]+|[\s,;:/&+|–—-]+$")


# Job-ad shorthand, spelt out as ESCO's English labels spell it ("QC Inspector" -> "quality control
# inspector"; ESCO writes ICT where ads write IT). "X cum Y" (a combined role, common in South and
# Southeast Asian ads) joins two occupations: "and" says so in plain English.
SHORTHAND = {
    "qa": "quality assurance", "qc": "quality control", "hr": "human resources", "hse": "health and safety",
    "f&b": "food and beverage", "r&d": "research and development", "asst": "assistant", "exec": "executive",
    "mgr": "manager", "engr": "engineer", "dept": "department", "ops": "operations", "mgmt": "management",
    "admin": "administrative", "ceo": "chief executive officer", "pa": "personal assistant", "cum": "and",
}  # fmt: skip
_SHORTHAND = re.compile(r"(?<![\w&])(" + "|".join(map(re.escape, SHORTHAND)) + r")(?![\w&])\.?", re.IGNORECASE)
_IT = re.compile(r"\bIT\b")  # capitals only: "it" is a pronoun


_EMPTY_BRACKETS = re.compile(r"\s*[(\[{][\s,;:/&+-]*[)\]}]")


def _tidy(text: str) -> str:
    """Whitespace collapsed; brackets a rule emptied and dangling separators dropped."""
    return _LEFTOVER.sub("", " ".join(_EMPTY_BRACKETS.sub(" ", text).split()))


def drop_brackets(text: str) -> str:
    """ "KITCHEN ASSISTANT (Bangi)" -> "KITCHEN ASSISTANT"."""
    return _tidy(_BRACKETS.sub(" ", text))


def drop_dash_tail(text: str) -> str:
    """ "Senior Accounts Payable - Korean Speaker" -> "Senior Accounts Payable"."""
    return _tidy(_DASH_TAIL.sub("", text))


def drop_seniority(text: str) -> str:
    """Seniority, training and contract words: "Junior Drafter" -> "Drafter"."""
    return _tidy(_SENIORITY.sub(" ", text))


def expand_shorthand(text: str) -> str:
    """ "QC SUPERVISOR" -> "QUALITY CONTROL SUPERVISOR", "Asst. Sales Manager" -> "assistant Sales Manager"."""
    shouting = text.isupper()

    def spelt(word: str) -> str:
        return word.upper() if shouting else word

    expanded = _SHORTHAND.sub(lambda m: spelt(SHORTHAND[m.group(1).lower()]), text)
    return _tidy(_IT.sub("ICT", expanded))


def drop_gender(text: str) -> str:
    """Gender markers and words: "FEMALE HOSTEL WARDEN" -> "HOSTEL WARDEN", "Baker (m/w/d)" -> "Baker"."""
    return _tidy(_GENDER_WORDS.sub(" ", drop_gender_markers(text)))


def drop_codes(text: str) -> str:
    """Tokens with digits, references: "Production Operator 1" -> "Production Operator"."""
    return _tidy(_CODES.sub(" ", text))


# In the order they apply: words first, so that "Internship - Junior Developer" keeps "Developer";
# the dash before the brackets, which "Executive (Thai)-Fashion" needs to find its qualifier.
RULES: dict[str, Callable[[str], str]] = {
    "gender": drop_gender,
    "seniority": drop_seniority,
    "dash-tail": drop_dash_tail,
    "brackets": drop_brackets,
    "codes": drop_codes,
    "shorthand": expand_shorthand,
}


# Rules whose word lists are in one language apply to queries in it or of unknown language only:
# "senior" or "temporary" in a French title is French, not a job ad's dressing.
RULE_LANGUAGES: dict[str, frozenset[str]] = {"seniority": frozenset({"en"}), "shorthand": frozenset({"en"})}


def check_rules(rules: Sequence[str]) -> None:
    unknown = [r for r in rules if r not in RULES]
    if unknown:
        raise ValueError(f"unknown query rule {unknown[0]!r}; available: {', '.join(RULES)}")


def normalise_query(text: str, rules: Sequence[str], language: str | None = None) -> str:
    """``text`` with ``rules`` applied in the order of ``RULES``; a rule that would leave no
    letter is skipped, as is one whose words are in another language than ``language`` (when
    known), and a text no rule changes beyond its spacing is returned as it is."""
    out = text
    for name, rule in RULES.items():
        if name in rules and (language is None or language in RULE_LANGUAGES.get(name, {language})):
            changed = rule(out)
            if any(ch.isalpha() for ch in changed):
                out = changed
    return text if out.split() == text.split() else out
