"""Files the user names on the command line (``--out``), written without replacing what the path is.

- ``-``: standard output, streamed; the command's own messages then go to stderr (``message_stream``);
- a new path or a regular file: a temporary file in the same folder, fsync, rename, so a failure
  leaves the old file whole and a reader never sees half a file;
- a symbolic link: followed, and its target replaced as above, so the link stays;
- a FIFO, a character device or anything else that is not a regular file: written in place, never
  renamed over (a rename would swap a pipe or a device node for a plain file);
- a folder: refused.

Any write error (no space, permission, a closed pipe) becomes one ``MeloInputError`` line naming
the path (exit code 2), and no temporary file is left behind. Internal caches (embedding shards,
indexes, pickles) have writers of their own: they are no user's output.
"""

from __future__ import annotations

import io
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TextIO

from melo_core.errors import MeloInputError

STDOUT = "-"
NEW_FILE_MODE = 0o644  # mkstemp creates 0600; an output is meant to be shared


def is_stdout(path: str | Path | None) -> bool:
    """Whether ``path`` means standard output; pass the user's string, since Path('./-') is '-'."""
    return path is not None and os.fspath(path) == STDOUT


def message_stream(path: str | Path | None) -> TextIO:
    """Where a command says what it did: stderr while its output goes to stdout, else stdout."""
    return sys.stderr if is_stdout(path) else sys.stdout


def write_error(exc: OSError, path: str | Path) -> MeloInputError:
    """The one line a failed write is reported with."""
    return MeloInputError(f"cannot write ({exc.strerror or exc})", path)


def output_target(path: str | Path) -> Path:
    """The path to write for ``path``: a symbolic link is followed to its target (the link stays)."""
    given = Path(path)
    if not given.is_symlink():
        return given
    try:
        return given.resolve()
    except (OSError, RuntimeError) as exc:  # a loop of links: RuntimeError up to Python 3.12
        raise MeloInputError(f"cannot follow the symbolic link ({getattr(exc, 'strerror', None) or exc})",
                             path) from None  # fmt: skip


def open_handle(fd: int) -> TextIO:
    """The text handle over a descriptor open for writing; tests replace it to inject write errors."""
    return open(fd, "w", encoding="utf-8", newline="")


@contextmanager
def open_output(path: str | Path) -> Iterator[TextIO]:
    """A UTF-8 text handle (no newline translation) on the output ``path``, as the module says."""
    if is_stdout(path):
        with _stdout() as handle:
            yield handle
        return
    target = output_target(path)
    try:
        try:
            mode: int | None = os.stat(target).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            raise MeloInputError("is a folder, not a file", path)
        writer = _replace if mode is None or stat.S_ISREG(mode) else _in_place
        with writer(target, mode) as handle:
            yield handle
    except OSError as exc:
        raise write_error(exc, path) from None


@contextmanager
def replaced_file(path: str | Path) -> Iterator[Path]:
    """A temporary path next to ``path`` for a writer that wants a file name (Parquet, a shard of a
    folder output): once the caller has written it, it is fsynced and renamed over ``path``, so a
    killed run leaves either the whole file or none. Write errors are one ``MeloInputError`` line."""
    target = output_target(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
    except OSError as exc:
        raise write_error(exc, path) from None
    temporary = Path(name)
    try:
        yield temporary
        with open(temporary, "rb") as handle:
            os.fsync(handle.fileno())
        os.chmod(temporary, NEW_FILE_MODE)
        os.replace(temporary, target)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise write_error(exc, path) from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


@contextmanager
def _replace(target: Path, mode: int | None) -> Iterator[TextIO]:
    """A temporary file next to ``target``, renamed over it once whole and on disk."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    temporary = Path(name)
    try:
        with _written(fd, durable=True) as handle:
            yield handle
        # A replaced file keeps its mode; a new one gets NEW_FILE_MODE.
        os.chmod(temporary, stat.S_IMODE(mode) if mode is not None else NEW_FILE_MODE)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


@contextmanager
def _in_place(target: Path, mode: int | None) -> Iterator[TextIO]:
    """Written straight into a FIFO or device: opening a FIFO waits for its reader, as a shell's ``>``."""
    with _written(os.open(target, os.O_WRONLY | os.O_TRUNC), durable=False) as handle:
        yield handle


@contextmanager
def _written(fd: int, durable: bool) -> Iterator[TextIO]:
    """``fd`` as a text handle, flushed (and with ``durable`` fsynced) then closed; after a failure
    closed quietly, so the first error is the one reported."""
    try:
        handle = open_handle(fd)
    except BaseException:
        os.close(fd)
        raise
    try:
        yield handle
        handle.flush()
        if durable:  # fsync on a pipe or a device fails with EINVAL: only files are synced
            os.fsync(handle.fileno())
    except BaseException:
        with suppress(OSError):
            handle.close()
        raise
    handle.close()


@contextmanager
def _stdout() -> Iterator[TextIO]:
    """Standard output as UTF-8 whatever the locale, flushed after what was printed before it."""
    stream = sys.stdout
    binary = getattr(stream, "buffer", None)
    wrapper = None
    if binary is not None:
        stream.flush()
        wrapper = io.TextIOWrapper(binary, encoding="utf-8", newline="", write_through=True)
    try:
        handle = wrapper if wrapper is not None else stream
        yield handle
        handle.flush()
    except OSError as exc:
        _drop_stdout()
        raise MeloInputError(f"cannot write to standard output ({exc.strerror or exc})") from None
    finally:
        if wrapper is not None:
            with suppress(OSError, ValueError):
                wrapper.detach()  # sys.stdout keeps its buffer open


def _drop_stdout() -> None:
    """Point standard output at /dev/null once writing to it failed: else the interpreter's last
    flush of a closed pipe prints 'Exception ignored ... BrokenPipeError' and exits with 120."""
    with suppress(OSError, ValueError):  # no descriptor (a test's StringIO): nothing to drop
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
