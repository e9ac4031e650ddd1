"""Which code produced a result: stored with every evaluation run."""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

from melo_core.config import PROJECT_ROOT

PACKAGE = "melo-studio"
FALLBACK_VERSION = "0.1.0"  # pyproject.toml's version, for a checkout that is not installed


def package_version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return FALLBACK_VERSION


# The results table the experiment runner appends to (relative to the project): a change there is a
# result, not code, so it does not make the next run of a sequence "-dirty".
RESULTS_TABLE = "experiments/results.csv"


def code_version(root: Path = PROJECT_ROOT) -> str:
    """``git describe --always`` of the project, with ``-dirty`` when a tracked file other than
    ``RESULTS_TABLE`` differs from the commit; else the package version. Never raises."""
    # Only the project's own repository: an installed copy must not describe an enclosing one.
    if (root / ".git").exists():
        try:
            described = _git(root, "describe", "--always")
            changed = _git(
                root, "status", "--porcelain", "--untracked-files=no", "--", ".", f":(exclude){RESULTS_TABLE}"
            )
            if described:
                return described + ("-dirty" if changed else "")
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        return package_version()
    except Exception:  # a broken installation must not stop an evaluation from being stored
        return FALLBACK_VERSION


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=True)
    return done.stdout.strip()
