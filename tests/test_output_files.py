"""Output files (``melo_core.files.output``) on ``export`` and ``link --out``: a symbolic link stays and its
target gets the content, a FIFO stays a FIFO and its reader gets the content, ``-`` is stdout with
the messages on stderr, and a write error (no space, a closed pipe) is exit code 2 and one line,
with the old file untouched and no temporary file left. Also ``eval --out -`` and dataset folders.
Real data: the Norwegian crosswalk and ESCO labels of the Norwegian MELO corpus."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TextIO

import pytest

from db.formats import SKOS_COLUMNS
from db.imports import import_taxonomy
from db.store import Store
from db.testing import empty_store_url, run_cli, run_cli_ok
from melo_core.errors import MeloInputError
from melo_core.esco.datasets import load_dataset, write_dataset
from melo_core.esco.taxonomy import taxonomy_from_datasets
from melo_core.files import output

ROOT = Path(__file__).resolve().parent.parent
OLD = "old content\n"
TITLES = 'code,title\n1,sykepleier\n2,lege\n3,"baker, konditor"\n'


@pytest.fixture(scope="module")
def store_url(melo_data: Path, datasets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A SQLite store with the Norwegian crosswalk and its decisions (3015 rows to export)."""
    with empty_store_url("sqlite", tmp_path_factory.mktemp("store")) as url:
        with Store(url, create=True) as store:
            import_taxonomy(store, taxonomy_from_datasets([load_dataset(datasets_dir / "nor_q_no_c_no")]), "esco",
                            "nor-slice")  # fmt: skip
        run_cli_ok("import-terms", "--scheme", "nor_no", "--crosswalk", "nor_no", "--data", str(melo_data),
                   "--with-decisions", "--db", url)  # fmt: skip
        yield url


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One cache for the module's `link` runs (the taxonomy pickle), never the project's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MELO_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def export_args(url: str, out: str) -> list[str]:
    return ["export", "--scheme", "nor_no", "--format", "skos-csv", "--out", out, "--db", url]


def link_args(data: Path, titles: Path, out: str) -> list[str]:
    return ["link", "--data", str(data), "--pipeline", "lexical", "--input", str(titles), "--column", "title",
            "--top", "3", "--quiet", "--out", out]  # fmt: skip


@pytest.fixture(scope="module", params=["export", "link"])
def command(request: pytest.FixtureRequest, store_url: str, nor_data: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], list[str]]:  # fmt: skip
    """The arguments of `export` or `link --out` writing to a given output."""
    if request.param == "export":
        return lambda out: export_args(store_url, out)
    titles = tmp_path_factory.mktemp("titles") / "titles.csv"
    titles.write_text(TITLES, encoding="utf-8")
    return lambda out: link_args(nor_data, titles, out)


@pytest.fixture(scope="module")
def expected(command: Callable[[str], list[str]], tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """What the command writes to a new regular file."""
    reference = tmp_path_factory.mktemp("reference") / "reference.csv"
    run_cli_ok(*command(str(reference)))
    return reference.read_bytes()


def test_a_symbolic_link_stays_and_its_target_gets_the_content(
    command: Callable[[str], list[str]], expected: bytes, tmp_path: Path
) -> None:
    target = tmp_path / "elsewhere" / "target.csv"
    target.parent.mkdir()
    target.write_text(OLD, encoding="utf-8")
    link = tmp_path / "link.csv"
    link.symlink_to(Path("elsewhere") / "target.csv")  # relative, as people make them
    run_cli_ok(*command(str(link)))
    assert link.is_symlink() and os.readlink(link) == str(Path("elsewhere") / "target.csv")
    assert target.read_bytes() == expected
    assert sorted(p.name for p in target.parent.iterdir()) == ["target.csv"]  # no temporary file left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "link.csv"]


@contextmanager
def fifo_reader(path: Path) -> Iterator[list[bytes]]:
    """A FIFO at ``path`` whose reader (a thread) collects everything written to it."""
    os.mkfifo(path)
    received: list[bytes] = []

    def read() -> None:
        with open(path, "rb") as fifo:  # waits for the writer
            received.append(fifo.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield received
    finally:
        reader.join(timeout=30)
        if reader.is_alive():  # the command never opened the FIFO: release the reader
            with suppress(OSError):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            reader.join(timeout=5)


def test_a_fifo_stays_and_its_reader_gets_the_content(
    command: Callable[[str], list[str]], expected: bytes, tmp_path: Path
) -> None:
    pipe = tmp_path / "pipe"
    with fifo_reader(pipe) as received:
        code, _, err = run_cli(*command(str(pipe)))
    assert code == 0, err
    assert received == [expected]
    assert stat.S_ISFIFO(pipe.lstat().st_mode)  # not replaced by a regular file
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]


def test_dash_is_standard_output_and_messages_go_to_stderr(
    command: Callable[[str], list[str]], expected: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(*command("-"))
    assert code == 0, err
    assert out.encode("utf-8") == expected  # the CSV and nothing else
    assert command("-")[0] == "link" or "wrote 3015 row(s) of scheme nor_no as skos-csv to -" in err
    assert not list(tmp_path.iterdir())  # no file named '-'


class FullDisk:
    """A file object on a full disk: every write fails with ENOSPC."""

    def __init__(self, handle: TextIO):
        self.handle = handle

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name: str) -> object:
        return getattr(self.handle, name)


def test_no_space_left_is_one_line_and_leaves_the_old_file(
    command: Callable[[str], list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out.csv"
    out.write_text(OLD, encoding="utf-8")
    real = output.open_handle
    monkeypatch.setattr(output, "open_handle", lambda fd: FullDisk(real(fd)))
    code, stdout, err = run_cli(*command(str(out)))
    assert code == 2
    assert err.splitlines() == [f"error: {out}: cannot write (No space left on device)"]
    assert "wrote" not in stdout
    assert out.read_text(encoding="utf-8") == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]  # no temporary file left


def melo_core_process(args: list[str], folder: Path, stdout: int) -> subprocess.Popen[str]:
    """``python -m melo_core ARGS`` in a process of its own, run in ``folder`` (where a file named
    '-' would land)."""
    return subprocess.Popen([sys.executable, "-m", "melo_core", *args], stdout=stdout, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=folder)  # fmt: skip


def test_export_to_dash_streams_to_a_pipe(store_url: str, tmp_path: Path) -> None:
    """`export ... --out - | head -1`: the header, no traceback."""
    with melo_core_process(export_args(store_url, "-"), tmp_path, subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        header = process.stdout.readline()
        process.stdout.close()  # as head does after one line
        err = process.stderr.read()
    assert header == ",".join(SKOS_COLUMNS) + "\n"
    assert "Traceback" not in err and "Exception ignored" not in err
    assert process.returncode in (0, 2)  # 2 when the rest no longer fitted in the pipe
    assert not list(tmp_path.iterdir())


def test_a_closed_pipe_on_stdout_is_one_line(store_url: str, tmp_path: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # every write to the pipe fails with EPIPE
    try:
        with melo_core_process(export_args(store_url, "-"), tmp_path, write) as process:
            _, err = process.communicate(timeout=300)
    finally:
        os.close(write)
    assert process.returncode == 2
    assert err.splitlines() == ["error: cannot write to standard output (Broken pipe)"]


def test_a_folder_is_refused(store_url: str, tmp_path: Path) -> None:
    code, _, err = run_cli(*export_args(store_url, str(tmp_path)))
    assert code == 2 and err.splitlines() == [f"error: {tmp_path}: is a folder, not a file"]


def test_eval_to_dash_prints_only_the_csv(tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("eval", "--datasets", str(tiny_dataset), "--scorers", "char-tfidf", "--quiet",
                             "--out", "-")  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("dataset,scorer,mode,depth") and len(lines) == 2
    assert "MRR" in err and "wrote 1 row(s) to -" in err  # the summary and the count on stderr


def test_dataset_folders_keep_links_and_refuse_dash_and_files(tiny_dataset: Path, tmp_path: Path) -> None:
    dataset = load_dataset(tiny_dataset)
    target = tmp_path / "real" / "tst_q_en_c_en"
    target.mkdir(parents=True)
    (target / "stale.txt").write_text(OLD, encoding="utf-8")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(MeloInputError, match=r"holds files that are not a dataset's \(stale.txt\)"):
        write_dataset(dataset, link)  # a folder it did not write: only with force
    write_dataset(dataset, link, force=True)
    assert link.is_symlink() and load_dataset(link).queries == dataset.queries
    assert (target / "stale.txt").read_text(encoding="utf-8") == OLD  # only the dataset's files are written
    assert sorted(p.name for p in target.parent.iterdir()) == ["tst_q_en_c_en"]
    with pytest.raises(MeloInputError, match="not - "):
        write_dataset(dataset, "-")
    (tmp_path / "file").write_text(OLD, encoding="utf-8")
    with pytest.raises(MeloInputError, match="exists and is not a folder"):
        write_dataset(dataset, tmp_path / "file")
