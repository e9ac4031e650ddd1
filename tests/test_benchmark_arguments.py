"""The benchmark scripts parse counts as the CLI does (``at_least``): a negative ``--limit`` once
meant "all but the last N" through Python's slicing, and a negative budget meant no bound."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _plain_int_options(script: Path) -> list[str]:
    """Options of ``script`` declared with ``type=int``."""
    found = []
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            for keyword in node.keywords:
                if keyword.arg == "type" and isinstance(keyword.value, ast.Name) and keyword.value.id == "int":
                    found.append(ast.literal_eval(node.args[0]) if node.args else "?")
    return found


def test_no_benchmark_option_takes_any_integer() -> None:
    scripts = sorted(BENCHMARKS.glob("*.py"))
    assert len(scripts) > 10
    plain = {script.name: options for script in scripts if (options := _plain_int_options(script))}
    assert plain == {}, f"use melo_core.cli.arguments.at_least for these counts: {plain}"


@pytest.mark.parametrize(
    ("script", "arguments", "message"),
    [
        ("prefill.py", ["--attention-budget", "-1"], "--attention-budget: must be 0 or more, got -1"),
        ("pipeline_speed.py", ["--bulk", "-2"], "--bulk: must be 0 or more, got -2"),
        ("tfidf_transform.py", ["--texts", "0"], "--texts: must be 1 or more, got 0"),
    ],
)
def test_a_count_out_of_range_stops_the_script(script: str, arguments: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *arguments], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert message in done.stderr
