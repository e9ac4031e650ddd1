"""The dataset builder reproduces the official MELO datasets from their crosswalks."""

from __future__ import annotations

from pathlib import Path

import pytest

from melo_core import build_dataset, load_crosswalk, load_dataset, taxonomy_from_datasets
from melo_core.esco.builder import select_target
from melo_core.esco.crosswalk import crosswalk_path


@pytest.mark.parametrize(
    ("matches", "expected"),
    [
        ({"a": "exactMatch", "b": "narrowMatch"}, ("a", "ok")),
        ({"a": "exactMatch", "b": "exactMatch"}, (None, "ambiguous")),
        ({"a": "narrowMatch"}, ("a", "ok")),
        ({"a": "narrowMatch", "b": "narrowMatch"}, (None, "ambiguous")),
        ({"a": "broadMatch"}, (None, "vague")),
        ({}, (None, "vague")),
    ],
)
def test_select_target_keeps_what_melo_keeps(matches: dict[str, str], expected: tuple) -> None:
    assert select_target(matches, "narrowMatch") == expected


@pytest.mark.parametrize(
    ("dataset", "crosswalk"),
    [
        ("deu_q_de_c_de", "deu_de"),
        ("nor_q_no_c_no", "nor_no"),
        ("bel_q_nl_c_en", "bel_nl"),
        ("usa_q_en_c_en", "usa_en"),
    ],
)
def test_rebuild_reproduces_official_queries_and_annotations(
    datasets_dir: Path, melo_data: Path, dataset: str, crosswalk: str
) -> None:
    official = load_dataset(datasets_dir / dataset)
    built, report = build_dataset(
        load_crosswalk(crosswalk_path(melo_data, crosswalk)),
        taxonomy_from_datasets([official]),
        list(official.corpus_languages),
    )
    assert built.name == dataset
    assert built.queries == official.queries
    assert built.query_ids == official.query_ids
    assert built.relevant == official.relevant
    assert built.corpus_ids == official.corpus_ids and built.corpus == official.corpus
    assert report.accepted == len(official.queries)
