"""The ``cache`` command (melo_core.cli.cache_admin): the cache folder's areas and pruning what has not
been used, on states that real ``link`` runs write and read."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from melo_core.cli.cache_admin import DAY, cache_entries, human_size, summary, unused_for
from melo_core.cli.commands import main
from melo_core.errors import MeloInputError
from melo_core.runtime.disk_cache import CONTENT_MEMO
from tests.conftest import ROOT, linked_slice

OLD = time.time() - 40 * DAY


def _run(args: list[str], cache: Path) -> str:
    """A command in its own process, as a user runs it (a process keeps the last taxonomy it read)."""
    done = subprocess.run([sys.executable, "-m", "melo_core", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "MELO_CACHE": str(cache)}, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _link(data: Path, query: str, lang: str, cache: Path) -> str:
    return _run(["link", "--data", str(data), "--pipeline", "lexical", "--query", query, "--query-lang", lang,
                 "--langs", lang, "--top", "3"], cache)  # fmt: skip


def _files(cache: Path) -> dict[str, float]:
    return {str(p.relative_to(cache)): p.stat().st_mtime for p in cache.rglob("*") if p.is_file()}


def _age(cache: Path) -> None:
    for path in cache.rglob("*"):
        os.utime(path, (OLD, OLD))


def _reads_move_access_times(folder: Path) -> bool:
    probe = folder / "probe"
    probe.write_bytes(b"x")
    os.utime(probe, (OLD, OLD))
    probe.read_bytes()
    moved = probe.stat().st_atime > OLD + DAY
    probe.unlink()
    return moved


def test_prune_removes_what_no_run_used_and_keeps_what_link_reads(melo_data: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    if not _reads_move_access_times(tmp_path):
        pytest.skip("this file system does not move access times on reads (noatime)")
    norwegian = linked_slice(tmp_path / "nor", melo_data,
                             ("processed/melo/nor_q_no_c_no", "raw/crosswalks_standard/nor_no"))  # fmt: skip
    french = linked_slice(tmp_path / "fra", melo_data, ("processed/melo/bel_q_fr_c_fr",))
    cache = tmp_path / "cache"
    shared = {CONTENT_MEMO}  # the data files' digests: every run reads them
    _link(french, "boulanger", "fr", cache)  # a label set no later run uses
    french_files = set(_files(cache)) - shared
    first = _link(norwegian, "bakere", "no", cache)
    norwegian_files = set(_files(cache)) - french_files - shared
    assert {f.split("/")[0] for f in norwegian_files} == {"crosswalk_mentions", "lexical", "taxonomy"}
    _age(cache)  # both runs 40 days ago ...
    assert _link(norwegian, "bakere", "no", cache) == first  # ... and the Norwegian one again today

    assert main(["cache", "--cache", str(cache), "--prune", "30", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would be removed (--dry-run)" in out and set(_files(cache)) == french_files | norwegian_files | shared
    would = {line.split()[2] for line in out.splitlines() if line.startswith("would remove")}
    assert would == {str(cache / "/".join(f.split("/")[:2])) for f in french_files}  # the area's entries

    assert main(["cache", "--cache", str(cache), "--prune", "30"]) == 0
    assert f"removed {len(french_files)} entries" in capsys.readouterr().out
    kept = _files(cache)
    assert set(kept) == norwegian_files | shared
    assert _link(norwegian, "bakere", "no", cache) == first
    assert _files(cache) == kept  # nothing rebuilt: what the run needs was kept


def test_summary_counts_each_area_and_its_unused_part(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "linker" / "b.mentions").mkdir(parents=True)
    (cache / "linker" / "a.npy").write_bytes(b"x" * 2000)
    (cache / "linker" / "b.mentions" / "m.npy").write_bytes(b"x" * 500)
    (cache / "linker" / "b.mentions" / "n.npy").write_bytes(b"x" * 500)
    (cache / "taxonomy").mkdir()
    (cache / "taxonomy" / "t.pkl").write_bytes(b"x" * 10)
    os.utime(cache / "linker" / "a.npy", (OLD, OLD))
    os.utime(cache / "linker" / "b.mentions" / "m.npy", (OLD, OLD))  # n.npy is new: the folder is in use
    entries = cache_entries(cache)
    assert [(e.area, e.path.name, e.size) for e in entries] == [
        ("linker", "a.npy", 2000), ("linker", "b.mentions", 1000), ("taxonomy", "t.pkl", 10)]  # fmt: skip
    assert [e.path.name for e in unused_for(entries, 30)] == ["a.npy"]
    assert [e.path.name for e in unused_for(entries, 45)] == []
    lines = summary(entries, 30)
    assert lines[1].split() == ["linker", "2", "3.0", "KB", "1", "(2.0", "KB)"]
    assert lines[2].split() == ["taxonomy", "1", "10", "B", "0", "(0", "B)"]
    assert lines[3].split() == ["all", "3", "3.0", "KB"]


def test_sizes_and_bad_input_are_plain(tmp_path: Path) -> None:
    assert [human_size(n) for n in (0, 999, 1000, 2_500_000, 3_200_000_000, 4e12)] == [
        "0 B", "999 B", "1.0 KB", "2.5 MB", "3.2 GB", "4000.0 GB"]  # fmt: skip
    with pytest.raises(MeloInputError, match="no cache folder"):
        cache_entries(tmp_path / "nothing")
    with pytest.raises(MeloInputError, match="below 0"):
        unused_for([], -1)
    assert main(["cache", "--cache", str(tmp_path / "nothing")]) == 2
