"""Outputs never destroy inputs (issue 87): an output path that is the store's file, an input file
or inside the data folder is refused with exit code 2 and one line, before anything is written;
``build-dataset`` writes only its own files and never touches siblings; the temporary files of a
killed run are removed by the next run that writes the same output (never a live writer's); an
unreachable Ray address is one line and exit code 2, not a hang.

Every refusal is checked byte for byte: the hashes of every file under the folders involved are
the same before and after. The store cases run on SQLite; where an output lands in the data folder
they run on PostgreSQL too (a PostgreSQL store has no file: there the data folder is the input).
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from db.imports import import_taxonomy
from db.store import Store
from db.testing import empty_store_url, run_cli, run_cli_ok
from db.testing import run_cli_refused as refused
from melo_core.esco.datasets import load_dataset
from melo_core.esco.taxonomy import taxonomy_from_datasets
from melo_core.files.output import remove_orphans
from tests.conftest import linked_slice

ROOT = Path(__file__).resolve().parent.parent
TITLES = "code,title\n1,sykepleier\n2,lege\n"
SUBPROCESS_BOUND_S = 180  # a bound for a command that used to hang, not a timing assertion


def tree(*roots: Path) -> dict[str, str]:
    """Every file under ``roots`` (and each root itself if a file), by path: its SHA-256."""
    hashes: dict[str, str] = {}
    for root in roots:
        paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in paths:
            hashes[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


def populate(url: str, melo_data: Path) -> None:
    """The Norwegian crosswalk with its decisions, against two versions of a taxonomy slice."""
    taxonomy = taxonomy_from_datasets([load_dataset(melo_data / "processed" / "melo" / "nor_q_no_c_no")])
    with Store(url, create=True) as store:
        import_taxonomy(store, taxonomy, "esco", "v1")
    run_cli_ok("import-terms", "--scheme", "nor_no", "--crosswalk", "nor_no", "--data", str(melo_data),
               "--with-decisions", "--db", url)  # fmt: skip
    with Store(url) as store:
        import_taxonomy(store, taxonomy, "esco", "v2")


@pytest.fixture(scope="module")
def sqlite_store(melo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A populated SQLite store file; tests copy its folder before pointing a command at it."""
    folder = tmp_path_factory.mktemp("store")
    with empty_store_url("sqlite", folder) as url:
        populate(url, melo_data)
    return folder / "melo.db"


@pytest.fixture
def store_copy(sqlite_store: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "store" / "melo.db"
    copy.parent.mkdir()
    copy.write_bytes(sqlite_store.read_bytes())
    return copy


@pytest.mark.parametrize("target", ["store", "wal", "shm", "journal", "hard link", "relative"])
def test_export_onto_the_store_is_refused_and_the_store_stays_byte_identical(
    store_copy: Path, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = store_copy.parent
    url = f"sqlite:///{store_copy}"
    out = {"store": store_copy, "wal": Path(f"{store_copy}-wal"), "shm": Path(f"{store_copy}-shm"),
           "journal": Path(f"{store_copy}-journal"), "hard link": folder / "same.db",
           "relative": Path("melo.db")}[target]  # fmt: skip
    if target == "hard link":
        os.link(store_copy, out)
    if target == "relative":  # the issue's own command: --out melo.db --db sqlite:///melo.db
        monkeypatch.chdir(folder)
        url = "sqlite:///melo.db"
    before = tree(folder)
    line = refused("export", "--scheme", "nor_no", "--format", "skos-csv", "--out", str(out), "--db", url)
    assert tree(folder) == before
    assert line.startswith(f"error: {out}: --out is ") and "the store" in line and str(store_copy.name) in line
    # The store still opens and exports: it is a store, not a CSV file.
    run_cli_ok("export", "--scheme", "nor_no", "--format", "skos-csv", "--out", str(folder.parent / "ok.csv"),
               "--db", f"sqlite:///{store_copy}")  # fmt: skip


def test_migrate_review_out_onto_the_store_is_refused_and_the_store_stays_byte_identical(
    store_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(store_copy.parent)
    before = tree(store_copy.parent)
    line = refused("migrate", "--scheme", "nor_no", "--to", "v2", "--dry-run", "--review-out", "melo.db",
                   "--db", "sqlite:///melo.db")  # fmt: skip
    assert line == ("error: melo.db: --review-out is the store (melo.db): an output never replaces an input; "
                    "choose another path")  # fmt: skip
    assert tree(store_copy.parent) == before
    code, _, err = run_cli("migrate", "--scheme", "nor_no", "--to", "v2", "--dry-run", "--review-out", "review.csv",
                           "--db", "sqlite:///melo.db")  # fmt: skip
    assert code == 0, err
    assert (store_copy.parent / "review.csv").read_text(encoding="utf-8").startswith("term_code,")


@pytest.fixture
def own_data(tmp_path: Path) -> Path:
    """A data folder of our own (MELO_DATA for the store commands), with a file in it."""
    data = tmp_path / "data"
    (data / "processed").mkdir(parents=True)
    (data / "processed" / "notes.txt").write_text("reference data\n", encoding="utf-8")
    return data


def test_store_command_outputs_inside_the_data_folder_are_refused(
    store_url: str, melo_data: Path, own_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On both backends: with PostgreSQL, the data folder is what an output may not land in."""
    populate(store_url, melo_data)
    monkeypatch.setenv("MELO_DATA", str(own_data))
    before = tree(own_data)
    line = refused("export", "--scheme", "nor_no", "--format", "sssom", "--out", str(own_data),
                   "--db", store_url)  # fmt: skip
    assert f"--out is the data folder ({own_data})" in line
    line = refused("export", "--scheme", "nor_no", "--format", "skos-csv", "--out",
                   str(own_data / "processed" / "notes.txt"), "--db", store_url)  # fmt: skip
    assert f"--out is inside the data folder ({own_data})" in line
    line = refused("migrate", "--scheme", "nor_no", "--to", "v2", "--dry-run", "--review-out",
                   str(own_data / "review.csv"), "--db", store_url)  # fmt: skip
    assert "--review-out is inside the data folder" in line
    assert tree(own_data) == before and sorted(p.name for p in own_data.iterdir()) == ["processed"]
    run_cli_ok("export", "--scheme", "nor_no", "--format", "skos-csv", "--out", str(tmp_path / "out.csv"),
               "--db", store_url)  # fmt: skip


def build_args(melo_data: Path, out: Path, *extra: str) -> list[str]:
    return ["build-dataset", "--data", str(melo_data), "--crosswalk", "nor_no", "--langs", "no",
            "--taxonomy", "dataset:nor_q_no_c_no", "--out", str(out), *extra]  # fmt: skip


def test_build_dataset_refuses_a_populated_folder_and_never_touches_its_sibling(
    melo_data: Path, tmp_path: Path
) -> None:
    existing = tmp_path / "EXISTING_DIR"
    (existing / "sub").mkdir(parents=True)
    (existing / "report.docx").write_bytes(b"the user's own file")
    (existing / "sub" / "data.csv").write_text("a,b\n", encoding="utf-8")
    sibling = tmp_path / "EXISTING_DIR.old"  # the sibling the old code removed
    sibling.mkdir()
    (sibling / "keep.txt").write_text("an unrelated folder\n", encoding="utf-8")
    before = tree(tmp_path)
    line = refused(*build_args(melo_data, existing))
    assert line.startswith(f"error: {existing}: the folder holds files that are not a dataset's (report.docx, sub)")
    assert tree(tmp_path) == before
    # --force: the dataset's files go beside the user's, which stay, as does the sibling.
    run_cli_ok(*build_args(melo_data, existing, "--force"))
    after = tree(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before
    assert sorted(p.name for p in existing.iterdir()) == [
        "annotations.tsv", "concept_mapping.tsv", "corpus_elements.tsv", "logged_stats.txt", "queries.tsv",
        "report.docx", "sub",
    ]  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["EXISTING_DIR", "EXISTING_DIR.old"]  # no staging left
    assert len(load_dataset(existing).queries) == 96


def test_build_dataset_rewrites_a_folder_it_wrote(melo_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "nor"
    sibling = tmp_path / "nor.old"
    sibling.mkdir()
    (sibling / "keep.txt").write_text("keep\n", encoding="utf-8")
    run_cli_ok(*build_args(melo_data, out))
    first = tree(out)
    (out / "queries.tsv").write_text("Q1\tchanged\n", encoding="utf-8")  # its own file: rewritten
    run_cli_ok(*build_args(melo_data, out))
    assert tree(out) == first
    assert (sibling / "keep.txt").read_text(encoding="utf-8") == "keep\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nor", "nor.old"]


def test_build_dataset_into_the_data_folder_or_onto_its_crosswalk_is_refused(melo_data: Path, tmp_path: Path) -> None:
    data = linked_slice(
        tmp_path / "data", melo_data, ("processed/melo/nor_q_no_c_no", "raw/crosswalks_standard/nor_no")
    )
    dataset = data / "processed" / "melo" / "nor_q_no_c_no"
    crosswalk = data / "raw" / "crosswalks_standard" / "nor_no"
    before = tree(dataset, crosswalk)
    line = refused(*build_args(data, dataset, "--force"))
    assert f"--out is inside the data folder ({data})" in line
    line = refused(*build_args(data, tmp_path, "--force"))
    assert f"--out holds the data folder ({data})" in line
    line = refused(*build_args(melo_data, crosswalk / "crosswalk.json", "--force"))
    assert "--out is the crosswalk" in line or "--out is inside the data folder" in line
    assert tree(dataset, crosswalk) == before


def test_eval_and_link_outputs_onto_their_inputs_are_refused(tiny_dataset: Path, tmp_path: Path) -> None:
    titles = tmp_path / "titles.csv"
    titles.write_text(TITLES, encoding="utf-8")
    before = tree(tmp_path)
    line = refused("eval", "--datasets", str(tiny_dataset), "--scorers", "char-tfidf", "--quiet",
                   "--out", str(tiny_dataset / "queries.tsv"))  # fmt: skip
    assert f"--out is inside a dataset folder ({tiny_dataset})" in line
    line = refused("eval", "--datasets", str(tiny_dataset), "--scorers", "char-tfidf", "--quiet",
                   "--out", str(tmp_path))  # fmt: skip
    assert "--out holds a dataset folder" in line
    link = ["link", "--input", str(titles), "--column", "title", "--scorer", "char-tfidf", "--query-lang", "no",
            "--langs", "no", "--quiet"]  # fmt: skip
    line = refused(*link, "--out", str(titles))
    assert f"--out is the --input file ({titles})" in line
    line = refused(*link, "--out", str(tmp_path / "out.csv"), "--rejects", str(titles))
    assert line.startswith(f"error: {titles}: --rejects is the --input file")
    line = refused(*link, "--out", str(tmp_path / "out.csv"), "--rejects", str(tmp_path / "out.csv"))
    assert "--rejects is the --out file" in line
    assert tree(tmp_path) == before


WRITER = """
import sys
from melo_core.files.output import open_output
with open_output(sys.argv[1]) as handle:
    handle.write("half of a file")
    handle.flush()
    print("writing", flush=True)
    sys.stdin.readline()  # held open until killed
"""


def start_writer(out: Path) -> subprocess.Popen[str]:
    """A process in the middle of writing ``out`` (its temporary file exists once it says so)."""
    process = subprocess.Popen([sys.executable, "-c", WRITER, str(out)], cwd=ROOT, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert process.stdout is not None and process.stdout.readline() == "writing\n"
    return process


def temporaries(out: Path) -> list[Path]:
    return sorted(out.parent.glob(f".{out.name}.*.tmp"))


def test_a_killed_writers_temporary_file_is_removed_by_the_next_run_a_live_ones_is_not(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    out = tmp_path / "results.csv"
    live = start_writer(out)  # a writer still at work: its temporary file must stay
    try:
        (in_flight,) = temporaries(out)
        killed = start_writer(out)
        (orphan,) = set(temporaries(out)) - {in_flight}
        assert orphan.stat().st_mode & 0o777 == 0o600
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert orphan.exists()
        run_cli_ok("eval", "--datasets", str(tiny_dataset), "--scorers", "char-tfidf", "--quiet", "--out", str(out))
        assert temporaries(out) == [in_flight]  # the killed run's is gone, the live writer's stays
        assert out.read_text(encoding="utf-8").startswith("dataset,scorer")
    finally:
        live.kill()
        live.wait()


def test_orphans_in_a_folder_output_go_and_live_or_young_ones_stay(tmp_path: Path) -> None:
    """What `link --resume` does in its folder of shards: only a dead process's temporary files,
    and those a day old, are removed."""
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True)  # fmt: skip
    dead = int(finished.stdout)
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        names = {
            "dead": f".part-000001.parquet.p{dead}-abcd1234.tmp",
            "live": f".part-000002.parquet.p{live.pid}-abcd1234.tmp",
            "old, no pid": ".part-000003.parquet.k2j4h5g6.tmp",
            "young, no pid": ".part-000004.parquet.x8y7z6w5.tmp",
            "old, live": f".part-000005.parquet.p{live.pid}-zz99zz99.tmp",
            "a shard": "part-000000.parquet",
            "a user's dot file": ".notes",
            "an old dot file": ".config.abcdefgh",  # shaped like an old staging folder, but no .tmp
        }
        for name in names.values():
            (tmp_path / name).write_bytes(b"x")
        two_days_ago = time.time() - 2 * 86400
        for key in ("old, no pid", "old, live", "an old dot file"):
            os.utime(tmp_path / names[key], (two_days_ago, two_days_ago))
        assert remove_orphans(tmp_path) == 3
        left = {key for key, name in names.items() if (tmp_path / name).exists()}
        assert left == {"live", "young, no pid", "a shard", "a user's dot file", "an old dot file"}
    finally:
        live.kill()
        live.wait()


def link_on_ray(titles: Path, out: Path, address: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """`link --engine ray` in a process of its own, bounded (it used to retry for ever)."""
    return subprocess.run(
        [sys.executable, "-m", "melo_core", "link", "--engine", "ray", "--address", address, "--input", str(titles),
         "--column", "title", "--out", str(out), "--scorer", "char-tfidf", "--query-lang", "no", "--langs", "no",
         "--quiet", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=SUBPROCESS_BOUND_S,
    )  # fmt: skip


def test_a_ray_address_that_refuses_is_one_line_and_exit_2(tmp_path: Path) -> None:
    titles = tmp_path / "titles.csv"
    titles.write_text(TITLES, encoding="utf-8")
    result = link_on_ray(titles, tmp_path / "out", "127.0.0.1:1")
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "error: cannot reach the Ray cluster at 127.0.0.1:1 (Connection refused; waited up to 10 s, "
        "--connect-timeout sets it): is it running?"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["titles.csv"]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that takes connections and never answers: no Ray cluster behind it."""
    with socket.create_server(("", 0)) as server:
        yield server.getsockname()[1]


def test_a_ray_address_that_never_answers_ends_in_exit_2(silent_port: int, tmp_path: Path) -> None:
    titles = tmp_path / "titles.csv"
    titles.write_text(TITLES, encoding="utf-8")
    result = link_on_ray(titles, tmp_path / "out", f"127.0.0.1:{silent_port}", "--connect-timeout", "1")
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert (
        last.startswith(f"error: cannot reach the Ray cluster at 127.0.0.1:{silent_port} (")
        and "Traceback" not in result.stderr
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["titles.csv"]


def test_core_commands_never_write_onto_the_configured_store(
    store_copy: Path, tiny_dataset: Path, melo_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """eval without --store, and build-dataset, do not read the store: they must not replace it."""
    monkeypatch.setenv("MELO_DB_URL", f"sqlite:///{store_copy}")
    before = tree(store_copy.parent)
    line = refused("eval", "--datasets", str(tiny_dataset), "--scorers", "char-tfidf", "--quiet",
                   "--out", str(store_copy))  # fmt: skip
    assert f"--out is the store ({store_copy})" in line
    line = refused(*build_args(melo_data, store_copy.parent, "--force"))
    assert f"--out holds the store ({store_copy})" in line
    line = refused("prepare", "--pipeline", "fast", "--query-lang", "no", "--langs", "no", "--quiet",
                   "--progress-file", f"{store_copy}-wal")  # fmt: skip
    assert f"--progress-file is the store's wal file ({store_copy}-wal)" in line
    assert tree(store_copy.parent) == before


def test_train_never_writes_its_model_into_the_data_folder_or_onto_the_store(
    melo_data: Path, store_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = linked_slice(tmp_path / "data", melo_data, ("processed/melo/nor_q_no_c_no",))
    monkeypatch.setenv("MELO_DB_URL", f"sqlite:///{store_copy}")
    before = tree(data, store_copy.parent)
    line = refused("train", "--data", str(data), "--out", str(data / "model"), "--quiet")
    assert f"--out is inside the data folder ({data})" in line
    line = refused("train", "--data", str(data), "--out", str(store_copy.parent), "--overwrite", "--quiet")
    assert f"--out holds the store ({store_copy})" in line
    assert tree(data, store_copy.parent) == before and sorted(p.name for p in data.iterdir()) == ["processed"]
