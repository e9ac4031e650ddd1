"""A sentence-transformers folder that is one ``StaticEmbedding`` module (the domain model, or a
model2vec-style model saved by sentence-transformers), read with ``tokenizers`` and numpy.

Such a model is a lookup table: a text's vector is the mean of its tokens' rows, as the module's
``EmbeddingBag`` computes it. Importing sentence-transformers and torch to compute that took about
7 s of a cold process's 12 (`link --pipeline fast`); the vectors are the same to float rounding.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import sparse

from melo_core.encoders.base import Role, normalise_rows

_STATIC = "StaticEmbedding"
_NORMALIZE = "Normalize"  # encode() normalises every vector anyway


def _module_types(folder: Path) -> list[tuple[str, str]] | None:
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        return [(str(m["type"]).rsplit(".", 1)[-1], str(m.get("path", ""))) for m in modules]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _prompts(folder: Path) -> tuple[dict[str, str], str | None]:
    try:
        config = json.loads((folder / "config_sentence_transformers.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}, None
    return dict(config.get("prompts") or {}), config.get("default_prompt_name")


def is_static_folder(folder: str | Path, prompt_names: Sequence[str | None] = ()) -> bool:
    """True when ``folder`` holds one StaticEmbedding (optionally then Normalize) with its table
    under ``embedding.weight``, and every prompt name asked for is defined there: anything else
    (model2vec's own layout, other modules, an unknown prompt) is left to sentence-transformers."""
    folder = Path(folder)
    types = _module_types(folder)
    if not types or types[0] != (_STATIC, "") or any(name != _NORMALIZE for name, _ in types[1:]):
        return False
    if not (folder / "tokenizer.json").is_file() or not (folder / "model.safetensors").is_file():
        return False
    prompts, _ = _prompts(folder)
    if any(name is not None and name not in prompts for name in prompt_names):
        return False
    from safetensors import safe_open

    try:
        with safe_open(str(folder / "model.safetensors"), framework="numpy") as weights:
            return "embedding.weight" in weights.keys()
    except Exception:  # not a readable safetensors file: sentence-transformers says what is wrong
        return False


class StaticEmbeddingEncoder:
    """The mean of a text's token rows, L2-normalised. ``spec`` is the caller's cache key, so the
    vectors cached by sentence-transformers stay valid."""

    def __init__(self, folder: str | Path, spec: str, template: str, prompt_names: dict[Role, str | None]):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        folder = Path(folder)
        self.spec = spec
        self._template = template
        self._table = np.ascontiguousarray(load_file(str(folder / "model.safetensors"))["embedding.weight"],
                                           dtype=np.float32)  # fmt: skip
        self.dim = int(self._table.shape[1])
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.no_padding()  # as StaticEmbedding does
        prompts, default = _prompts(folder)
        self._prompt = {role: prompts.get(name or default or "", "") for role, name in prompt_names.items()}
        self.symmetric = self._prompt["query"] == self._prompt["passage"]

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
