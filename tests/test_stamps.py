"""The stamps that key caches to the files they were computed from (melo_core.runtime.disk_cache):
of the files' names and bytes, not of their times, so that a folder copied or laid out again keeps
its caches, and any edit still rebuilds them."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from melo_core.encoders.base import EncoderSpec
from melo_core.runtime import disk_cache
from melo_core.runtime.disk_cache import CONTENT_MEMO, content_digests, files_stamp, folder_stamp


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "config.json").write_text('{"dim": 8}', encoding="utf-8")
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    (folder / "1_Pooling" / "config.json").write_text('{"mean": true}', encoding="utf-8")
    return folder


def later(path: Path, seconds: int = 3600) -> None:
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + seconds * 10**9))


def test_a_copied_model_folder_with_new_times_keeps_its_stamp(model: Path, tmp_path: Path) -> None:
    stamp = folder_stamp(model)
    copy = tmp_path / "elsewhere" / "model"
    shutil.copytree(model, copy)
    for file in copy.rglob("*"):
        if file.is_file():
            later(file)
    assert folder_stamp(copy) == stamp  # names relative to the folder, and the same bytes
    # What the embedding cache is keyed by: the copy's embeddings are the original's.
    assert EncoderSpec("st", str(copy)).stamped_key() == EncoderSpec("st", str(model)).stamped_key()
    (copy / "config.json").write_text('{"dim": 9}', encoding="utf-8")
    assert EncoderSpec("st", str(copy)).stamped_key() != EncoderSpec("st", str(model)).stamped_key()


def test_an_edited_added_or_renamed_file_changes_the_stamp(model: Path) -> None:
    stamp = folder_stamp(model)
    weights = model / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[100] ^= 1  # one bit, the same size
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(weights.stat().st_atime_ns, (model / "config.json").stat().st_mtime_ns))
    edited = folder_stamp(model)
    assert edited != stamp
    (model / "extra.txt").write_text("x", encoding="utf-8")
    added = folder_stamp(model)
    (model / "extra.txt").rename(model / "other.txt")
    renamed = folder_stamp(model)
    assert len({stamp, edited, added, renamed}) == 4 and folder_stamp(model) == renamed


def test_a_file_is_read_once_per_change_and_the_digests_are_kept_in_the_cache(model: Path, tmp_path: Path) -> None:
    weights = model / "model.safetensors"
    [_, digest] = content_digests([model / "config.json", weights])
    memo_file = tmp_path / "cache" / CONTENT_MEMO
    memo = json.loads(memo_file.read_text(encoding="utf-8"))
    assert memo[str(weights.resolve())][3] == digest
    # A digest on disk that does not match the bytes is believed while size, time and inode are
    # unchanged (this is what spares reading 465 MB per command), so a new process shows it was not re-read.
    memo[str(weights.resolve())][3] = "f" * 40
    memo_file.write_text(json.dumps(memo), encoding="utf-8")
    disk_cache._memo_file = None  # as a new process
    assert content_digests([weights]) == ["f" * 40]
    later(weights)  # touched: read again, and the true digest is back
    assert content_digests([weights]) == [digest]
    # A file that is gone leaves the memo at the next write.
    gone = str((model / "config.json").resolve())
    assert gone in json.loads(memo_file.read_text(encoding="utf-8"))
    (model / "config.json").unlink()
    content_digests([model / "1_Pooling" / "config.json"])
    assert gone not in json.loads(memo_file.read_text(encoding="utf-8"))


def test_a_cache_that_cannot_be_written_still_stamps(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder should be", encoding="utf-8")
    monkeypatch.setenv("MELO_CACHE", str(blocked))
    assert files_stamp([model / "config.json"]) == files_stamp([model / "config.json"])


def test_the_same_files_in_another_folder_have_the_same_stamp(model: Path, tmp_path: Path) -> None:
    """What keys the taxonomy, the crosswalks' mentions and the calibration rows, and names the data
    of a results row: data copied to a server, or spelt as a relative path, is the same data."""
    files = [model / "config.json", model / "1_Pooling" / "config.json"]
    stamp = files_stamp(files)
    copy = tmp_path / "server" / "data"
    shutil.copytree(model, copy)
    assert files_stamp([copy / "config.json", copy / "1_Pooling" / "config.json"]) == stamp
    assert files_stamp([Path(os.path.relpath(f)) for f in files]) == stamp
    # The names count, relative to the folder that holds them all: a file moved is other data.
    (copy / "1_Pooling" / "config.json").rename(copy / "1_Pooling" / "moved.json")
    assert files_stamp([copy / "config.json", copy / "1_Pooling" / "moved.json"]) != stamp
    assert files_stamp([]) == files_stamp([])
