"""Which code produced a result: stored with every evaluation run."""

from __future__ import annotations

import subprocess
from importlib import metadata

from melo_core.config import PROJECT_ROOT

PACKAGE = "melo-studio"
FALLBACK_VERSION = "0.1.0"  # pyproject.toml's version, for a checkout that is not installed


def package_version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return FALLBACK_VERSION


def code_version() -> str:
    """``git describe --always --dirty`` of the project, else the package version. Never raises."""
    # Only the project's own repository: an installed copy must not describe an enclosing one.
    if (PROJECT_ROOT / ".git").exists():
        try:
            done = subprocess.run(
                ["git", "-C", str(PROJECT_ROOT), "describe", "--always", "--dirty"],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
            described = done.stdout.strip()
            if done.returncode == 0 and described:
                return described
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        return package_version()
    except Exception:  # a broken installation must not stop an evaluation from being stored
        return FALLBACK_VERSION
