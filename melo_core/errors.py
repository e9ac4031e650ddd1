"""Errors the user can act on: they name the file and line at fault."""

from __future__ import annotations

from pathlib import Path


class MeloInputError(Exception):
    """Bad input data. The CLI prints it as one line and exits with code 2."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.message = message
        self.path = Path(path) if path is not None else None
        # A URL as given: Path would make "s3://bucket" "s3:/bucket"
        self._shown = path if isinstance(path, str) and "://" in path else str(self.path)
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self._shown
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        return where + self.message
