"""Job-ad query rules: what each removes, that none empties a query, and that a pipeline naming
them ranks a noisy title exactly as its clean form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from melo_core.errors import MeloInputError
from melo_core.esco.taxonomy import cached_taxonomy_from_melo
from melo_core.linking.pipeline import Pipeline, load_pipeline
from melo_core.linking.query_rules import RULES, normalise_query


@pytest.mark.parametrize(
    ("title", "rule", "expected"),
    [
        ("FEMALE HOSTEL WARDEN", "gender", "HOSTEL WARDEN"),
        ("Production Clerk (Male Only)", "gender", "Production Clerk"),
        ("Bäcker (m/w/d)", "gender", "Bäcker"),
        ("Internship Digital Marketer", "seniority", "Digital Marketer"),
        ("Senior Accounts Payable", "seniority", "Accounts Payable"),
        ("Part-time Cashier", "seniority", "Cashier"),
        ("Senior Accounts Payable - Korean Speaker", "dash-tail", "Senior Accounts Payable"),
        ("Customer Service Executive (Native Thai)-Fashion", "dash-tail", "Customer Service Executive (Native Thai)"),
        ("Self-employed baker", "dash-tail", "Self-employed baker"),
        ("KITCHEN ASSISTANT (Bangi)", "brackets", "KITCHEN ASSISTANT"),
        ("Production Operator 1", "codes", "Production Operator"),
        ("Test Engineer, Automation", "codes", "Test Engineer, Automation"),
        ("QC SUPERVISOR", "shorthand", "QUALITY CONTROL SUPERVISOR"),
        ("Asst. Sales Manager", "shorthand", "assistant Sales Manager"),
        ("IT Security Project Manager", "shorthand", "ICT Security Project Manager"),
        ("Marketing cum Merchandising Executive", "shorthand", "Marketing and Merchandising Executive"),
        ("it support", "shorthand", "it support"),
        ("Opsomer", "shorthand", "Opsomer"),
    ],
)  # fmt: skip
def test_each_rule_removes_its_noise_and_nothing_else(title: str, rule: str, expected: str) -> None:
    assert RULES[rule](title) == expected


def test_rules_apply_in_order_and_never_empty_a_query() -> None:
    every = list(RULES)
    assert normalise_query("Internship - Junior Developer", every) == "Developer"
    assert normalise_query("Customer Service Executive (Native Thai)-Fashion", every) == "Customer Service Executive"
    assert normalise_query("Intern", every) == "Intern"  # the rule would leave nothing
    assert normalise_query("(Senior)", ["brackets"]) == "(Senior)"
    assert normalise_query("Baker (Bangi)", []) == "Baker (Bangi)"


def test_english_word_lists_leave_queries_in_other_languages_alone() -> None:
    """Seniority words are English: a French "Conseiller senior" keeps its word, an English or
    unknown-language title loses it; rules without a language apply to every query."""
    assert normalise_query("Senior Accounts Payable", ["seniority"], "en") == "Accounts Payable"
    assert normalise_query("Senior Accounts Payable", ["seniority"]) == "Accounts Payable"
    assert normalise_query("Conseiller senior", ["seniority"], "fr") == "Conseiller senior"
    assert normalise_query("Technicien QC", ["shorthand"], "fr") == "Technicien QC"
    assert normalise_query("Technician QC", ["shorthand"], "en") == "Technician quality control"
    assert normalise_query("Senior Bäcker (m/w/d)", ["seniority", "gender"], "de") == "Senior Bäcker"


def test_a_pipeline_with_rules_ranks_a_noisy_title_as_its_clean_form(melo_data: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain.toml"
    plain.write_text(load_pipeline("lexical").path.read_text(encoding="utf-8"), encoding="utf-8")
    ruled = tmp_path / "ruled.toml"
    ruled.write_text('query_rules = ["seniority", "brackets"]\n' + plain.read_text(encoding="utf-8"), encoding="utf-8")
    taxonomy = cached_taxonomy_from_melo(melo_data)
    options: dict[str, Any] = dict(index_kind="exact", cache_dir=tmp_path / "cache", persist=False, show_progress=False)
    noisy = Pipeline(load_pipeline(ruled), taxonomy, ["en"], **options).link(["Senior Baker (Bangi)"], top_k=5)[0]
    plain_pipeline = Pipeline(load_pipeline(plain), taxonomy, ["en"], **options)
    clean = plain_pipeline.link(["Baker"], top_k=5)[0]
    assert [(c.concept_uri, round(c.score, 9)) for c in noisy] == [(c.concept_uri, round(c.score, 9)) for c in clean]
    unruled = plain_pipeline.link(["Senior Baker (Bangi)"], top_k=5)[0]
    assert [c.score for c in unruled] != [c.score for c in clean]


def test_an_unknown_rule_names_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('query_rules = ["shout"]\n' + load_pipeline("lexical").path.read_text(encoding="utf-8"))
    with pytest.raises(MeloInputError, match=r"query_rules.*unknown rule 'shout'"):
        load_pipeline(bad)
