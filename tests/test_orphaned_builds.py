"""A model build runs in a process of its own (``melo_core.runtime.processes.build_apart``). When
whoever started it is killed outright (SIGKILL: the app's server stopped hard, `prepare` killed), the
build stops too and removes its temporary folder, instead of keeping the cores busy for nobody."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_one_preparation import gone, wait_for

ROOT = Path(__file__).resolve().parent.parent
PARENT = """
import sys
from melo_core import config
from melo_core.runtime.processes import build_apart
from tests.test_orphaned_builds import slow_build
with config.chosen_folders(data=sys.argv[1], cache=sys.argv[1], models=sys.argv[1]):
    build_apart(slow_build, sys.argv[1])
"""


def slow_build(data_dir: str, on_progress: Callable[[int, int, float], None] | None = None) -> Path:
    """A build that writes its temporary folder and its process id, then works for two minutes."""
    temporary = Path(data_dir) / ".tmp-slow"
    temporary.mkdir()
    try:
        (temporary / "pid").write_text(str(os.getpid()), encoding="utf-8")
        time.sleep(120)
        return temporary
    finally:
        for path in temporary.iterdir():
            path.unlink()
        temporary.rmdir()


@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_a_build_whose_parent_is_killed_stops_and_cleans_up(tmp_path: Path, sigint: str) -> None:
    # "ignored": an ancestor ignores SIGINT (seen once in a test worker); Python keeps that in its
    # children, and the build ran on for its two minutes.
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint == "ignored" else None
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path)], cwd=ROOT, preexec_fn=ignore)
    pid_file = tmp_path / ".tmp-slow" / "pid"
    try:
        assert wait_for(lambda: pid_file.is_file() and pid_file.read_text(encoding="utf-8") != "", 120)
        child = int(pid_file.read_text(encoding="utf-8"))
        assert not gone(child)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    assert wait_for(lambda: gone(child), 30), "the build went on after its parent was killed"
    assert not (tmp_path / ".tmp-slow").exists()
