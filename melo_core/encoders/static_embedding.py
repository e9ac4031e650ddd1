"""A sentence-transformers folder that is one ``StaticEmbedding`` module (the domain model, or a
model2vec-style model saved by sentence-transformers), read with ``tokenizers`` and numpy.

Such a model is a lookup table: a text's vector is the mean of its tokens' rows, as the module's
``EmbeddingBag`` computes it. Importing sentence-transformers and torch to compute that took about
7 s of a cold process's 12 (`link --pipeline fast`); the vectors are the same to float rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import sparse

from melo_core.encoders.base import EncoderSpec, Role, normalise_rows
from melo_core.encoders.st_folder import module_types, role_prompts

_STATIC = "StaticEmbedding"
_NORMALIZE = "Normalize"  # encode() normalises every vector anyway


def static_encoder(spec: EncoderSpec) -> StaticEmbeddingEncoder | None:
    """The encoder of an ``st:`` folder holding one StaticEmbedding (optionally then Normalize)
    with its table under ``embedding.weight``, when every prompt name asked for is defined there;
    None for anything else (model2vec's own layout, other modules, an unknown prompt): that is
    left to sentence-transformers, which also says what is wrong with a broken folder."""
    folder = spec.path()
    types = module_types(folder)
    if not types or types[0] != (_STATIC, "") or any(name != _NORMALIZE for name, _ in types[1:]):
        return None
    if not (folder / "tokenizer.json").is_file() or (chosen := role_prompts(spec, folder)) is None:
        return None
    from safetensors.numpy import load_file

    try:
        table = load_file(str(folder / "model.safetensors")).get("embedding.weight")
    except Exception:  # missing or not a readable safetensors file
        return None
    if table is None:
        return None
    return StaticEmbeddingEncoder(folder / "tokenizer.json", table, spec.stamped_key(), spec.template(), chosen)


class StaticEmbeddingEncoder:
    """The mean of a text's token rows, L2-normalised. ``spec`` is the cache key sentence-transformers
    would give the folder, so the vectors it cached stay valid."""

    def __init__(self, tokenizer: Path, table: np.ndarray, spec: str, template: str, prompts: dict[Role, str]):
        from tokenizers import Tokenizer

        self.spec = spec
        self._template = template
        self._table = np.ascontiguousarray(table, dtype=np.float32)
        self.dim = int(self._table.shape[1])
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.no_padding()  # as StaticEmbedding does
        self._prompt = prompts
        self.symmetric = prompts["query"] == prompts["passage"]

    def encode(self, texts: Sequence[str], role: Role = "query") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        prompt = self._prompt[role]
        wrapped = [prompt + self._template.format(t) for t in texts]
        ids = [encoding.ids for encoding in self._tokenizer.encode_batch(wrapped, add_special_tokens=False)]
        lengths = np.fromiter((len(row) for row in ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter((i for row in ids for i in row), dtype=np.int64, count=int(lengths.sum()))
        bags = np.repeat(np.arange(len(ids)), lengths)
        shares = np.repeat(1.0 / np.maximum(lengths, 1), lengths).astype(np.float32)
        # Each row of `mean_of` averages its text's token rows; an empty text gets a zero vector, as in EmbeddingBag.
        mean_of = sparse.csr_matrix((shares, (bags, flat)), shape=(len(ids), self._table.shape[0]))
        means = np.asarray(mean_of @ self._table, dtype=np.float32)
        return normalise_rows(means)
