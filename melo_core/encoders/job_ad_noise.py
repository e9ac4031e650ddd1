"""ESCO labels dressed as job ads write titles: the training side of issue 19's job-ad noise.

``train --job-ad-noise P`` makes a share ``P`` of the training anchors look like vacancy titles
("senior sales assistant (m/f/d)", "Sales Assistant - Berlin", "SALES ASSISTANT 2"), each paired
with a clean label of the same concept, so the encoder learns that these words carry no
occupation. The additions are of the kinds ``melo_core.linking.query_rules`` removes from queries
(seniority and contract words, gender markers, brackets, dash qualifiers, codes), but the word
lists are their own (e.g. "lead", "experienced", cities, language requirements): generic job-ad
conventions, no job-ad title read. Cities are capitals of the EU and a few large labour markets.
"""

from __future__ import annotations

import random

SENIORITY = ("senior", "junior", "sr.", "jr.", "trainee", "intern", "internship", "graduate", "entry level",
             "experienced", "qualified", "lead")  # fmt: skip
CONTRACT = ("part-time", "full-time", "part time", "temporary", "temp", "contract", "freelance", "permanent",
            "urgent", "immediate start", "vacancy for", "hiring")  # fmt: skip
GENDER = ("(m/f/d)", "(m/w/d)", "(f/m/d)", "(h/f)", "(m/f)", "m/w", "(male)", "(female)", "female", "male",
          "ladies only")  # fmt: skip
LANGUAGE_SKILLS = ("English speaker", "German speaking", "French speaker", "Mandarin speaker", "Spanish speaking",
                   "Arabic speaker", "bilingual", "native Italian", "Japanese speaker")  # fmt: skip
CITIES = ("Amsterdam", "Athens", "Berlin", "Bratislava", "Brussels", "Bucharest", "Budapest", "Copenhagen",
          "Dublin", "Helsinki", "Lisbon", "Ljubljana", "London", "Madrid", "Paris", "Prague", "Riga", "Rome",
          "Sofia", "Stockholm", "Tallinn", "Vienna", "Vilnius", "Warsaw", "Zagreb", "New York", "Singapore",
          "Dubai", "Sydney", "Toronto", "Tokyo", "Mumbai", "remote", "home based", "night shift")  # fmt: skip


def _code(rng: random.Random) -> str:
    return rng.choice(("", "#", "ref ", "REQ-", "ID ")) + str(rng.randint(1, 9999))


def _before(rng: random.Random) -> str:
    return rng.choice(SENIORITY + CONTRACT)


def _after(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return rng.choice(GENDER)
    if kind == 1:
        return f"({rng.choice(LANGUAGE_SKILLS)})"
    if kind == 2:
        return f"- {rng.choice(LANGUAGE_SKILLS)}"
    if kind == 3:
        city = rng.choice(CITIES)
        return rng.choice((f"({city})", f"- {city}", f"| {city}"))
    if kind == 4:
        return rng.choice(("I", "II", "III", "1", "2", _code(rng)))
    return f"({rng.choice(SENIORITY + CONTRACT)})"


def dress(label: str, rng: random.Random) -> str:
    """``label`` with one to three job-ad additions, in title case or capitals as often as not."""
    words = label
    for _ in range(rng.choice((1, 1, 2, 3))):
        if rng.random() < 0.5:
            words = f"{_before(rng)} {words}"
        else:
            words = f"{words} {_after(rng)}"
    case = rng.random()
    if case < 0.25:
        return words.upper()
    if case < 0.5:
        return words.title()
    return words
