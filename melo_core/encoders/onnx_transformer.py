"""A sentence-transformers folder of a BERT-family transformer with mean pooling (e5-esco, or any
such ``st:`` folder), run with ONNX Runtime instead of torch.

Loading e5-esco through sentence-transformers imported it, transformers and torch: about 6 s of
a cold `link --pipeline best` of 14 s. The transformer is exported once to ONNX (torch's
exporter, at the end of e5-esco's build or on first use) into the cache folder, keyed by a stamp
of the model's files, so a retrained model gets a new export and the model folder is left as it
was (its stamp keys the embedding cache). Tokenising, mean pooling and normalising are the
folder's own tokenizer and numpy; the vectors equal sentence-transformers' to about 3e-7 and keep
its cache key.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import warnings
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from melo_core import config
from melo_core.encoders.base import EncoderSpec, Role, normalise_rows
from melo_core.encoders.st_folder import module_types, read_json, role_prompts
from melo_core.errors import MeloInputError
from melo_core.runtime.disk_cache import folder_stamp

log = logging.getLogger(__name__)

_MODULES = ("Transformer", "Pooling", "Normalize")
_MODEL_TYPES = frozenset({"bert", "xlm-roberta", "roberta"})  # what torch's exporter is known to take here
_MAX_BYTES = 1_800_000_000  # the TorchScript exporter writes one protobuf (2 GB at most): larger stay with torch
# A batch's attention scores grow with rows × width²: 64 ESCO descriptions of up to 512 pieces took
# 2.7 GB in each of prepare's workers. Long texts go in fewer rows; titles (under 64 pieces) keep 64.
ATTENTION_BUDGET: int | None = None  # None: $MELO_ATTENTION_BUDGET, else 64 rows of 64 pieces
ATTENTION_BUDGET_VARIABLE = "MELO_ATTENTION_BUDGET"  # set by benchmarks/prefill.py for its workers


def attention_budget(default: int = 64 * 64**2) -> int:
    """The budget; the variable is read here, at the first batch, not at import: a wrong value
    stops the command that encodes, in one line, not every import of melo_core."""
    if ATTENTION_BUDGET is not None:
        return ATTENTION_BUDGET
    raw = os.environ.get(ATTENTION_BUDGET_VARIABLE, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise MeloInputError(f"{ATTENTION_BUDGET_VARIABLE} must be a whole number of 1 or more (rows x width² a "
                             f"batch may hold), got {raw!r}")  # fmt: skip
    return int(raw)


_threads: int | None = None  # set by bulk.limit_threads; None: ONNX Runtime's default (the cores)


def set_threads(threads: int | None) -> None:
    """Threads of the sessions created from now on (a Ray actor's or `--threads`' share)."""
    global _threads
    _threads = threads


def _omp_threads() -> int | None:
    """OMP_NUM_THREADS, which Ray sets to an actor's CPUs and torch follows (ONNX Runtime does not)."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def nvidia_gpu_present() -> bool:
    """Whether the machine has an NVIDIA driver, asked without importing torch (3 s). There a
    transformer runs on the GPU through sentence-transformers, as before: far faster for a bulk
    file than ONNX Runtime on the CPU."""
    return Path("/proc/driver/nvidia/version").is_file() or any(Path("/dev").glob("nvidia[0-9]*"))


def exportable(folder: Path) -> bool:
    """A folder this reader takes: Transformer, mean Pooling (prompt included), Normalize; a BERT-family
    model in safetensors under the size limit, with a tokenizer.json."""
    modules = module_types(folder)
    if tuple(name for name, _ in modules) not in (_MODULES, _MODULES[:2]) or modules[0][1]:
        return False
    if not _mean_pooling(read_json(folder / modules[1][1] / "config.json")):
        return False
    if read_json(folder / "config.json").get("model_type") not in _MODEL_TYPES:
        return False
    weights = folder / "model.safetensors"
    return (folder / "tokenizer.json").is_file() and weights.is_file() and weights.stat().st_size < _MAX_BYTES


def _mean_pooling(pooling: dict) -> bool:
    """Mean pooling over every token, the prompt's too: ``pooling_mode`` as sentence-transformers
    writes it now, or the ``pooling_mode_*_tokens`` flags of older versions."""
    if not pooling.get("include_prompt", True):
        return False
    if "pooling_mode" in pooling:
        return pooling["pooling_mode"] == "mean"
    flags = {key: value for key, value in pooling.items() if key.startswith("pooling_mode_")}
    return flags.get("pooling_mode_mean_tokens") is True and not any(
        value for key, value in flags.items() if key != "pooling_mode_mean_tokens"
    )


def onnx_path(folder: Path) -> Path:
    """Where the export of ``folder`` as it is now lives: a new one for every change of its files."""
    folder = folder.resolve()
    name = hashlib.sha1(str(folder).encode()).hexdigest()[:10]
    return config.cache_dir() / "onnx" / f"{folder.name}-{name}-{folder_stamp(folder)}" / "model.onnx"


def export_onnx(folder: Path) -> Path:
    """``folder``'s transformer as ONNX (input_ids, attention_mask -> last_hidden_state), exported
    once; needs torch, transformers and onnx. The weights go to a file beside the graph, which
    ONNX Runtime maps instead of reading (0.3 s and 0.15 GB to open e5-esco, against 1.6 s and
    0.9 GB in one file). Written to a temporary folder, then renamed: a half-written export is never read."""
    target = onnx_path(folder)
    if target.is_file():
        return target
    import onnx
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(folder), local_files_only=True, attn_implementation="eager").eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    # An example with padding, so the traced graph keeps the attention mask.
    input_ids = torch.tensor([[0, 10, 11, 2], [0, 12, 2, 1]])
    attention_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    temporary = target.parent.with_name(f".tmp-{os.getpid()}-{target.parent.name}")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    axes = {0: "texts", 1: "tokens"}
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
            torch.onnx.export(LastHiddenState(), (input_ids, attention_mask), str(temporary / "traced.onnx"),
                              input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state"],
                              dynamic_axes={"input_ids": axes, "attention_mask": axes, "last_hidden_state": axes},
                              opset_version=17, dynamo=False)  # fmt: skip
        graph = onnx.load(str(temporary / "traced.onnx"))
        onnx.save_model(graph, str(temporary / target.name), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=f"{target.name}.data")  # fmt: skip
        (temporary / "traced.onnx").unlink()
        (temporary / "source.txt").write_text(f"{folder.resolve()}\n", encoding="utf-8")  # which model, for people
        try:
            os.replace(temporary, target.parent)
        except OSError:  # another process finished the same export first
            if not target.is_file():
                raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    _remove_older_exports(target.parent)
    return target


def _remove_older_exports(current: Path) -> None:
    """The exports of the folder's earlier files (0.5 GB each for e5-esco) go. A process still
    running one keeps its mapped weights: removing a file does not unmap it."""
    prefix = current.name.rsplit("-", 1)[0] + "-"
    for older in current.parent.glob(f"{prefix}*"):
        if older != current and older.is_dir() and not older.name.startswith("."):
            shutil.rmtree(older, ignore_errors=True)


def _max_length(folder: Path) -> int:
    """As sentence-transformers truncates: its configured max_seq_length, else the tokenizer's."""
    configured = read_json(folder / "sentence_bert_config.json").get("max_seq_length")
    if configured:
        return int(configured)
    tokenizer_max = read_json(folder / "tokenizer_config.json").get("model_max_length")
    if isinstance(tokenizer_max, int) and tokenizer_max < 100_000:
        return tokenizer_max
    return int(read_json(folder / "config.json").get("max_position_embeddings", 514)) - 2


def onnx_encoder(spec: EncoderSpec) -> OnnxTransformerEncoder | None:
    """The ONNX Runtime encoder of an ``st:`` folder this reader takes (exported first when needed),
    when every prompt name asked for is defined there; None otherwise, or when the export fails:
    sentence-transformers then loads the folder."""
    folder = spec.path()
    if not exportable(folder) or (chosen := role_prompts(spec, folder)) is None:
        return None
    try:
        path = export_onnx(folder)
    except Exception as exc:  # an architecture the exporter cannot trace: torch reads it instead
        log.warning("%s: no ONNX export (%s); loading it with sentence-transformers", folder, exc)
        return None
    batch = int(spec.options.get("batch", 64))
    return OnnxTransformerEncoder(path, folder, spec.stamped_key(), spec.template(), chosen, batch)


class OnnxTransformerEncoder:
    """Mean of the last hidden states over a text's tokens, L2-normalised. ``spec`` is the cache key
    sentence-transformers would give the folder, so the vectors it cached stay valid."""

    def __init__(self, model: Path, folder: Path, spec: str, template: str, prompts: dict[Role, str], batch: int):
        self._model, self._folder = model, folder
        self.spec = spec
        self._template = template
        self._prompt = prompts
        self._batch = batch
        self.symmetric = prompts["query"] == prompts["passage"]
        settings = read_json(folder / "config.json")
        self._pad = int(settings.get("pad_token_id") or 0)  # RoBERTa numbers positions by it
        hidden = settings.get("hidden_size")  # the export's output is the last hidden states
        self.dim = int(hidden) if hidden else int(self._session.get_outputs()[0].shape[-1])

    @cached_property
    def _session(self):
        """Loaded at the first text, not before: `prepare` asks a parent process what is cached
        while its workers embed, and the session is 0.4 GB."""
        import onnxruntime

        options = onnxruntime.SessionOptions()
        # Idle threads that spin between runs take the cores from faiss and numpy, which work
        # between one query's encodings: p50 21 -> 12 ms a title on 2 cores without it.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        threads = _threads or _omp_threads()
        if threads:
            options.intra_op_num_threads = threads
        return onnxruntime.InferenceSession(str(self._model), options, providers=["CPUExecutionProvider"])

    @cached_property
    def _tokenizer(self):
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(self._folder / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(_max_length(self._folder))
        return tokenizer

    def encode(self, texts: Sequence[str], role: Role = "query") -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        prompt = self._prompt[role]
        ids = [e.ids for e in self._tokenizer.encode_batch([prompt + self._template.format(t) for t in texts])]
        lengths = [len(row) for row in ids]
        order = np.argsort(lengths, kind="stable")  # batches of like lengths pad little
        for rows in self._batches(order, lengths):
            width = lengths[rows[-1]]  # the longest: rows come shortest first
            input_ids = np.full((len(rows), width), self._pad, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                input_ids[r, : len(ids[i])] = ids[i]
                mask[r, : len(ids[i])] = 1
            hidden = self._session.run(None, {"input_ids": input_ids, "attention_mask": mask})[0]
            weights = mask[:, :, None].astype(np.float32)
            out[rows] = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return normalise_rows(out)

    def _batches(self, order: np.ndarray, lengths: list[int]) -> Iterator[list[int]]:
        """Rows in ``order`` (shortest first), at most ``batch`` at a time and at most
        ``ATTENTION_BUDGET`` rows × width² (the attention scores a batch holds per head)."""
        budget = attention_budget()
        rows: list[int] = []
        for i in order:
            if rows and (len(rows) == self._batch or (len(rows) + 1) * lengths[i] ** 2 > budget):
                yield rows
                rows = []
            rows.append(int(i))
        if rows:
            yield rows
