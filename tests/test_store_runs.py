"""Evaluation runs in the store (db.runs): real evaluations and the published baselines, stored and
read back, on a fresh SQLite file and on PostgreSQL too when MELO_TEST_PG_URL is set."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import inspect

from db.runs import (
    QUERY_COLUMNS,
    RUN_COLUMNS,
    delete_run,
    evaluate_and_store,
    get_run,
    import_published,
    list_runs,
    run_metrics_frame,
    run_queries,
    save_run,
)
from db.store import Store, current_revisions, head_revisions
from db.testing import run_cli
from melo_core import MeloDataset, Protocol, ScorerContext, create_scorer, evaluate, load_dataset
from melo_core.errors import MeloInputError
from melo_core.evaluation.protocol import EvaluationResult
from melo_core.evaluation.published import load_all_published, load_published
from melo_core.metrics import TREC_NAMES
from melo_core.version import code_version

DATASET = "nor_q_no_c_no"  # monolingual, 96 queries, 7.8k surface forms


@pytest.fixture(scope="module")
def small_dataset(melo_data: Path) -> MeloDataset:
    return load_dataset(melo_data / "processed" / "melo" / DATASET).subset(40)


@pytest.fixture(scope="module")
def evaluation(small_dataset: MeloDataset) -> EvaluationResult:
    context = ScorerContext(small_dataset.query_language, small_dataset.corpus_languages, show_progress=False)
    # Depth 100, as the published char-tfidf run: some queries have no relevant element in it.
    return evaluate(small_dataset, create_scorer("char-tfidf", context), Protocol("trec", 100))


def test_the_migration_creates_the_run_tables(store: Store) -> None:
    assert current_revisions(store.engine) == head_revisions()
    inspector = inspect(store.engine)
    assert {"runs", "run_queries"} <= set(inspector.get_table_names())
    columns = {c["name"] for c in inspector.get_columns("run_queries")}
    assert {"run_id", "position", "query_id", "query_text", "first_rank", "gold", "top"} <= columns
    (fk,) = inspector.get_foreign_keys("run_queries")
    assert fk["referred_table"] == "runs" and fk["options"].get("ondelete") == "CASCADE"


def test_a_saved_evaluation_reads_back_as_it_was(
    store: Store, small_dataset: MeloDataset, evaluation: EvaluationResult
) -> None:
    assert math.isinf(evaluation.first_ranks().max()), "the slice should have a query missed within depth 100"
    run_id = save_run(store, evaluation, small_dataset, code_version="test-1")

    (run,) = list_runs(store)
    assert run == get_run(store, run_id)
    assert (run.id, run.scorer, run.dataset, run.source, run.read_only) == (
        run_id,
        "char-tfidf",
        DATASET,
        "ours",
        False,
    )
    assert (run.mode, run.depth, run.code_version) == ("trec", 100, "test-1")
    assert run.metrics == evaluation.metrics  # every metric, exactly, under summarize()'s names
    assert {"mrr", "acc@1", "acc@10", "map", "ndcg@10"} <= run.metrics.keys()
    assert run.n_queries == len(evaluation.query_ids) == 40
    assert run.skipped_queries == evaluation.skipped_queries
    assert run.seconds == pytest.approx(evaluation.seconds)
    assert run.created_at.tzinfo is not None

    queries = run_queries(store, run_id)
    assert list(queries.columns) == QUERY_COLUMNS
    assert list(queries["position"]) == list(range(40))
    assert list(queries["query_id"]) == evaluation.query_ids
    text_of = dict(zip(small_dataset.query_ids, small_dataset.queries, strict=True))
    assert list(queries["query_text"]) == [text_of[q] for q in evaluation.query_ids]
    np.testing.assert_array_equal(queries["first_rank"].to_numpy(), evaluation.first_ranks())
    assert queries["reciprocal_rank"].mean() == pytest.approx(evaluation.metrics["mrr"])
    assert (queries.loc[np.isinf(queries["first_rank"]), "reciprocal_rank"] == 0).all()
    assert [[cid for cid, _ in top] for top in queries["top"]] == evaluation.top_ids
    assert all(len(top) == 10 for top in queries["top"])
    surface = dict(zip(small_dataset.corpus_ids, small_dataset.corpus, strict=True))
    first = evaluation.query_ids[0]
    assert queries["gold"][0] == [(cid, surface[cid]) for cid in small_dataset.relevant[first]]
    assert queries["top"][0][0] == (evaluation.top_ids[0][0], surface[evaluation.top_ids[0][0]])


def test_published_baselines_import_once_read_only_under_our_metric_names(
    store: Store, melo_data: Path, small_dataset: MeloDataset, evaluation: EvaluationResult
) -> None:
    expected = load_all_published(melo_data)
    assert import_published(store, melo_data) == len(expected) > 0
    assert import_published(store, melo_data) == 0  # idempotent
    published = list_runs(store, "published")
    assert len(published) == len(expected)
    assert all(r.read_only and r.source == "published" and r.mode is None and r.depth is None for r in published)
    with pytest.raises(MeloInputError, match="read-only"):
        delete_run(store, published[0].id)
    assert len(list_runs(store, "published")) == len(expected)

    # The published file's trec_eval names are stored under ours, equal to the file's values.
    openai = next(r for r in published if (r.scorer, r.dataset) == ("openai", DATASET))
    summary = melo_data / "results" / "openai" / DATASET / "summary.tsv"
    values = dict(line.split("\t") for line in summary.read_text(encoding="utf-8").splitlines()[1:])
    assert openai.metrics["mrr"] == float(values["recip_rank"])
    assert openai.metrics["acc@1"] == float(values["success_1"])
    assert openai.metrics == load_published(melo_data, "openai", DATASET)
    assert not set(openai.metrics) & (set(TREC_NAMES) - set(TREC_NAMES.values()))
    assert run_queries(store, openai.id).empty

    # Ours and published side by side in one frame, the shared metrics in the same columns.
    ours = save_run(store, evaluation, small_dataset)
    frame = run_metrics_frame(store)
    assert list(frame.columns[: len(RUN_COLUMNS)]) == RUN_COLUMNS
    assert len(frame) == len(expected) + 1
    row = frame.set_index("run_id").loc[ours]
    assert (row["scorer"], row["source"], row["mrr"]) == ("char-tfidf", "ours", evaluation.metrics["mrr"])
    assert frame.set_index("run_id").loc[openai.id, "mrr"] == openai.metrics["mrr"]
    assert math.isnan(frame.set_index("run_id").loc[openai.id, "ndcg@10"])  # not published


def test_latest_keeps_the_newest_run_per_scorer_and_dataset_and_delete_removes_a_run(
    store: Store, small_dataset: MeloDataset, evaluation: EvaluationResult
) -> None:
    first = save_run(store, evaluation, small_dataset)
    second = save_run(store, evaluation, small_dataset)
    other = save_run(store, evaluation, small_dataset, scorer="char-tfidf@again")
    assert [r.id for r in list_runs(store, latest=True)] == [second, other]
    assert list(run_metrics_frame(store, latest=True)["run_id"]) == [second, other]
    assert get_run(store, first).code_version == code_version()  # recorded when not given
    delete_run(store, second)
    assert [r.id for r in list_runs(store, "ours")] == [first, other]
    assert [r.id for r in list_runs(store, latest=True)] == [first, other]
    with pytest.raises(MeloInputError, match=f"no evaluation run with id {second}"):
        run_queries(store, second)  # its query rows went with it


def test_unknown_runs_and_sources_are_clear_errors(store: Store) -> None:
    for call in (lambda: delete_run(store, 999), lambda: run_queries(store, 999), lambda: get_run(store, 999)):
        with pytest.raises(MeloInputError, match="no evaluation run with id 999"):
            call()
    with pytest.raises(MeloInputError, match="unknown run source"):
        list_runs(store, "theirs")
    assert run_metrics_frame(store).empty and list(run_metrics_frame(store).columns) == RUN_COLUMNS


def test_evaluate_and_store_reports_progress_and_stores_each_run(store: Store, melo_data: Path) -> None:
    calls: list[tuple[int, int, str]] = []
    ids = evaluate_and_store(
        store, melo_data, [DATASET], ["char-tfidf", "edit-distance"], on_progress=lambda *a: calls.append(a),
        limit_queries=12,
    )  # fmt: skip
    runs = list_runs(store)
    assert [r.id for r in runs] == ids and [r.scorer for r in runs] == ["char-tfidf", "edit-distance"]
    # Default protocol as eval's: the published depth of the same method.
    assert all((r.mode, r.depth, r.n_queries) == ("trec", 100, 12) for r in runs)
    assert runs[0].code_version == code_version()
    assert calls[0] == (0, 24, f"{DATASET} / char-tfidf")
    assert calls[-1] == (24, 24, f"{DATASET} / edit-distance")
    assert [done for done, _, _ in calls] == sorted(done for done, _, _ in calls)

    with pytest.raises(MeloInputError, match="unknown scorer 'nope'"):
        evaluate_and_store(store, melo_data, [DATASET], ["char-tfidf", "nope"])
    with pytest.raises(MeloInputError, match="depth must be"):
        evaluate_and_store(store, melo_data, [DATASET], ["char-tfidf"], depth="deep")
    assert len(list_runs(store)) == 2  # nothing was evaluated


def test_cli_eval_store_and_import_results(melo_data: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    code, out, err = run_cli(
        "eval", "--data", str(melo_data), "--datasets", DATASET, "--scorers", "char-tfidf,edit-distance",
        "--limit-queries", "20", "--store", "--db", url, "--create", "--quiet",
    )  # fmt: skip
    assert code == 0, err
    assert "stored run 1 " in out and "stored run 2 " in out

    code, out, err = run_cli("import-results", "--data", str(melo_data), "--db", url)
    assert code == 0, err
    n_published = len(load_all_published(melo_data))
    assert f"imported {n_published} published run(s)" in out
    code, out, err = run_cli("import-results", "--data", str(melo_data), "--db", url)
    assert code == 0 and "imported 0 published run(s)" in out

    with Store(url) as store:
        ours = list_runs(store, "ours")
        assert [(r.scorer, r.dataset, r.n_queries) for r in ours] == [
            ("char-tfidf", DATASET, 20),
            ("edit-distance", DATASET, 20),
        ]
        assert len(run_queries(store, ours[0].id)) == 20
        assert len(list_runs(store, "published")) == n_published

    code, _, err = run_cli("import-results", "--data", str(tmp_path), "--db", url)
    assert code == 2 and "no published results" in err
    code, _, err = run_cli("eval", "--data", str(melo_data), "--datasets", DATASET, "--scorers", "char-tfidf",
                           "--db", url)  # fmt: skip
    assert code == 2 and "--db goes with --store" in err
