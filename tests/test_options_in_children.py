"""Every command honours its folder options (--data, --cache, --models) in every process it starts:
the model build `prepare` runs apart and its embedding workers use the parent's folders, not the
environment's or the project's defaults. The README's commands run as a user on a fresh clone runs
them: no MELO_* variable, in a folder without ./data."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from melo_core import config
from melo_core.runtime.processes import build_apart
from tests.conftest import slice_dataset

ROOT = Path(__file__).resolve().parent.parent
DATASETS = ("nor_q_no_c_no", "nor_q_no_c_en")  # Norwegian and English labels: `--langs no,en`
DISTRACTORS = 200  # corpus labels kept beside the relevant ones: the domain model trains in seconds on them


@pytest.fixture(scope="module")
def sliced(melo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sliced")
    for name in DATASETS:
        slice_dataset(melo_data / "processed" / "melo" / name, root / "processed" / "melo" / name, DISTRACTORS)
    return root


def clean_env() -> dict[str, str]:
    """This environment without a single MELO_* variable (data, cache, models, ESCO, store)."""
    return {name: value for name, value in os.environ.items() if not name.startswith("MELO_")}


def run_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "melo_core", *args], cwd=cwd, env=clean_env(),
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def test_the_readmes_commands_run_without_any_melo_variable(sliced: Path, tmp_path: Path) -> None:
    """`pipelines`, `prepare --pipeline fast` (its domain model trained in a process of its own, its
    labels embedded by two worker processes) and `link`, with the folders as options only. Before,
    the build read ./data of the project and stopped with exit 2 ("no MELO datasets found")."""
    cwd, cache, models = tmp_path / "elsewhere", tmp_path / "cache", tmp_path / "models"
    cwd.mkdir()
    folders = ("--data", str(sliced), "--cache", str(cache), "--models", str(models))

    listed = run_cli(cwd, "pipelines", *folders, "--langs", "no,en")
    assert listed.returncode == 0, listed.stderr
    fast = listed.stdout.split("\n\nfast: ")[1].split("\n\n")[0]
    assert "needs: domain model, domain labels" in fast and "ready: no" in fast
    assert "no MELO data" not in listed.stdout

    prepared = run_cli(cwd, "prepare", *folders, "--pipeline", "fast", "--langs", "no,en", "--query-lang", "no",
                       "--workers", "2", "--quiet")  # fmt: skip
    assert prepared.returncode == 0, prepared.stderr
    assert prepared.stdout.strip() == "fast: ready over no, en"
    trained = json.loads((models / "esco-static" / "melo_training.json").read_text(encoding="utf-8"))
    assert trained["data"]["source"] == f"ESCO union of the MELO corpora in {sliced}"  # --data, into --models
    assert any((cache / "embeddings").iterdir()) and any((cache / "indexes").iterdir())
    assert list(cwd.iterdir()) == []  # nothing made where the command ran

    listed = run_cli(cwd, "pipelines", *folders, "--langs", "no,en")
    assert listed.returncode == 0, listed.stderr
    assert "ready: yes" in listed.stdout.split("\n\nfast: ")[1].split("\n\n")[0]

    linked = run_cli(cwd, "link", *folders, "Bäckermeister")
    assert linked.returncode == 0, linked.stderr
    assert "using 'fast' meanwhile" in linked.stderr  # best is not prepared; fast is, in these folders
    ranks = [line.split()[0] for line in linked.stdout.splitlines() if "http://data.europa.eu/esco/" in line]
    assert ranks == [str(rank) for rank in range(1, 11)]

    # A team copies the prepared folders to its server (other paths, new times, as `cp -r` does):
    # the copy serves at once and embeds nothing again (caches are keyed by bytes, not times).
    server = tmp_path / "server"
    for folder in (cache, models):
        shutil.copytree(folder, server / folder.name, copy_function=shutil.copy)
    copied = ("--data", str(sliced), "--cache", str(server / "cache"), "--models", str(server / "models"))

    def cached() -> set[Path]:  # what was computed; the files' digests (stamps/) may be added
        return {p for p in (server / "cache").rglob("*") if p.is_file() and p.parts[-3:-1] != ("cache", "stamps")}

    built = cached()
    listed = run_cli(cwd, "pipelines", *copied, "--langs", "no,en")
    assert "ready: yes" in listed.stdout.split("\n\nfast: ")[1].split("\n\n")[0], listed.stdout
    again = run_cli(cwd, "link", *copied, "Bäckermeister")
    assert again.returncode == 0 and again.stdout == linked.stdout, again.stderr
    assert cached() == built


def test_a_first_use_trains_the_model_on_the_commands_data(sliced: Path, tmp_path: Path) -> None:
    """`link --pipeline fast` before `prepare`: the domain model is trained on first use, in a
    process of its own, on --data into --models (before: "there is no MELO data to train it on")."""
    cwd, models = tmp_path / "elsewhere", tmp_path / "models"
    cwd.mkdir()
    linked = run_cli(cwd, "link", "--data", str(sliced), "--cache", str(tmp_path / "cache"), "--models", str(models),
                     "--pipeline", "fast", "--query-lang", "no", "--langs", "no,en", "sykepleier")  # fmt: skip
    assert linked.returncode == 0, linked.stderr
    assert "http://data.europa.eu/esco/" in linked.stdout
    trained = json.loads((models / "esco-static" / "melo_training.json").read_text(encoding="utf-8"))
    assert trained["data"]["source"] == f"ESCO union of the MELO corpora in {sliced}"
    assert list(cwd.iterdir()) == []


def test_the_ray_engines_actors_use_the_commands_folders(sliced: Path, tmp_path: Path) -> None:
    """`link --engine ray`: each actor builds its linker in a process of its own, with --cache as
    the command's (before: the project's ./cache, the environment having none)."""
    cwd, cache, out = tmp_path / "elsewhere", tmp_path / "cache", tmp_path / "linked"
    cwd.mkdir()
    titles = tmp_path / "titles.csv"
    titles.write_text("title\nBäckermeister\nsykepleier\n", encoding="utf-8")
    linked = run_cli(cwd, "link", "--engine", "ray", "--workers", "1", "--input", str(titles), "--column", "title",
                     "--out", str(out), "--pipeline", "lexical", "--query-lang", "no", "--data", str(sliced),
                     "--cache", str(cache), "--models", str(tmp_path / "models"), "--quiet")  # fmt: skip
    assert linked.returncode == 0, linked.stderr
    assert list(out.glob("*.parquet"))
    assert any((cache / "lexical").iterdir())  # fitted by the actor: the command itself fits nothing here
    assert list(cwd.iterdir()) == []


def _report_folders(data_dir: str, on_progress: Callable[[int, int, float], None] | None = None) -> Path:
    """A build that writes the folders it sees (in the process ``build_apart`` starts) into its cache folder."""
    target = config.cache_dir() / "seen.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"argument": data_dir, **config.folders()}), encoding="utf-8")
    return target


def test_a_build_apart_sees_the_folders_its_parent_chose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment names other folders than the command's options: the child uses the options'."""
    for name in ("DATA", "CACHE", "MODELS"):
        monkeypatch.setenv(f"MELO_{name}", str(tmp_path / f"from-env-{name.lower()}"))
    chosen = {"data": str(tmp_path / "data"), "cache": str(tmp_path / "cache"), "models": str(tmp_path / "models")}
    with config.chosen_folders(**chosen):
        written = build_apart(_report_folders, chosen["data"])
    assert written == tmp_path / "cache" / "seen.json"
    assert json.loads(written.read_text(encoding="utf-8")) == {"argument": chosen["data"], **chosen}
    assert config.cache_dir() == tmp_path / "from-env-cache"  # the choice ended with the block
