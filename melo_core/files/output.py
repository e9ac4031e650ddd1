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

An output is never one of the command's inputs: ``check_output`` refuses, before any work, a path
that is the store's file (or its ``-wal``, ``-shm``, ``-journal``), an input file, or lies in the
data folder (or holds one of them). Temporary files are named ``.NAME.p<pid>-XXXX.tmp``: the next
writer of the same output removes those a killed run left (its process gone, or a day old), never
a live writer's.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TextIO

from melo_core.errors import MeloInputError

STDOUT = "-"
NEW_FILE_MODE = 0o644  # mkstemp creates 0600; an output is meant to be shared
ORPHAN_AGE_S = 24 * 3600  # a temporary file this old is a dead run's, whatever its pid says
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")  # files SQLite keeps beside a store's file


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


Protected = tuple[str, str | Path | None]  # what a path is to the command ("the store"), and the path


def sqlite_file(url: str | None) -> Path | None:
    """The file of a ``sqlite:///PATH`` store URL (as SQLAlchemy reads it: relative to the working
    folder, ``sqlite:////abs`` absolute); None for an in-memory SQLite or a server (PostgreSQL)."""
    match = re.match(r"^sqlite(?:\+\w+)?://(/[^?]*)?", url or "")
    if match is None or not match[1]:
        return None
    name = match[1][1:]
    if name.startswith("file:"):  # a SQLite URI filename (?uri=true)
        name = name[len("file:") :]
    return Path(name) if name and name != ":memory:" else None


def store_inputs(url: str | None) -> list[Protected]:
    """The store at ``url`` as inputs of ``check_output``: its file and SQLite's companions."""
    path = sqlite_file(url)
    if path is None:
        return []
    return [("the store", path), *((f"the store's {suffix[1:]} file", Path(f"{path}{suffix}"))
                                   for suffix in SQLITE_COMPANIONS)]  # fmt: skip


def check_output(out: str | Path | None, inputs: Iterable[Protected], option: str = "--out") -> None:
    """Refuse (one ``MeloInputError`` line naming both) an output ``out`` that would overwrite an
    input: the same file (by path, or by inode for a hard link), a path inside an input folder
    (the data folder), or a folder output holding an input. ``-``, a URL and None pass."""
    if out is None or is_stdout(out) or "://" in os.fspath(out):
        return
    for what, given in inputs:
        if given is None or "://" in os.fspath(given):
            continue
        relation = _relation(Path(out), Path(given))
        if relation is None:
            continue
        raise MeloInputError(f"{option} {relation} {what} ({given}): an output never replaces an input; "
                             "choose another path", out)  # fmt: skip


def _relation(out: Path, source: Path) -> str | None:
    """How ``out`` stands to ``source``: "is", "is inside", "holds", or None (apart). Compared as
    written and with links followed: a data folder of links into another holds what its links name."""
    for target, given in ((_absolute(out), _absolute(source)), (_followed(out), _followed(source))):
        if target == given or _same_file(target, given):
            return "is"
        if target.is_relative_to(given):
            return "is inside"
        if given.is_relative_to(target):
            return "holds"
    return None


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


def _followed(path: Path) -> Path:
    """``path`` with its links followed as far as they exist (a new file's folder may be a link)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a loop of links: compared as written
        return _absolute(path)


def _same_file(first: Path, second: Path) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist (yet)
        return False


def temporary_prefix(target: Path) -> str:
    """The start of the name of this process's temporary files for ``target``."""
    return f".{target.name}.p{os.getpid()}-"


def remove_orphans(folder: Path, name: str | None = None) -> int:
    """Remove the temporary files (and staging folders) in ``folder`` that killed runs left for
    the output ``name`` (None: any output): those whose process is gone, or older than a day
    (and those named before the pid was in the name, once a day old). Returns how many."""
    pattern = re.escape(name) if name is not None else r".+"
    with_pid = re.compile(rf"^\.{pattern}\.p(\d+)-[a-z0-9_]+\.tmp$")
    # Named before the pid: mkstemp's .NAME.XXXXXXXX.tmp, and a dataset's staging .NAME.XXXXXXXX
    # (only for a named output: a plain dot file could look like it)
    suffix = r"(?:\.tmp)?" if name is not None else r"\.tmp"
    without_pid = re.compile(rf"^\.{pattern}\.[a-z0-9_]{{8}}{suffix}$")
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        match = with_pid.match(entry.name)
        if match is None and without_pid.match(entry.name) is None:
            continue
        try:
            age = time.time() - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        if age < ORPHAN_AGE_S and (match is None or _alive(int(match[1]))):
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed += 1
        except FileNotFoundError:  # another run cleaned it first
            continue
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's process (alive); a pid past the range
        return True
    return True


_SWEPT: set[str] = set()  # folders this process has cleaned of orphans


def _temporary_file(target: Path) -> tuple[int, str]:
    """A new temporary file next to ``target``, after the orphans of earlier runs in its folder are
    gone: once per folder and process (a run writing 20,000 shards to one folder scans it once)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = os.path.abspath(target.parent)
    if folder not in _SWEPT:
        remove_orphans(target.parent)
        _SWEPT.add(folder)
    return tempfile.mkstemp(prefix=temporary_prefix(target), suffix=".tmp", dir=target.parent)


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
        fd, name = _temporary_file(target)
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
    fd, name = _temporary_file(target)
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
