"""Work run in fresh processes: embedding workers, and model builds run apart from the process that
asks for them, so that the memory a build takes (torch, its optimiser, the training pairs) goes
back to the system when the build ends instead of staying with a long-lived process."""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import sys
import threading
import traceback
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from melo_core import config
from melo_core.errors import MeloInputError
from melo_core.runtime.preparing import held

Progress = Callable[[int, int, float], None]  # (step, steps, loss), as training reports it


@contextmanager
def bare_main() -> Iterator[None]:
    """A plain ``__main__`` while child processes start: spawn runs the parent's ``__main__`` file
    again in each child, and under Streamlit that is the page itself (the children need nothing
    from it)."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


PARENT_CHECK_SECONDS = 1.0


def _stop_when_orphaned(parent: int) -> None:
    """Interrupt this process (as Ctrl-C: the build removes its temporary folder) once its parent is
    gone. A parent killed outright (SIGKILL, SIGTERM) cannot stop its children, and a build left
    running kept two cores busy for minutes with nobody waiting for it."""

    def watch() -> None:
        while os.getppid() == parent:
            threading.Event().wait(PARENT_CHECK_SECONDS)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=watch, name="parent watch", daemon=True).start()


def _build_child(build: Callable[..., Path], data_dir: str, folders: dict[str, str],
                 messages: multiprocessing.Queue, parent: int | None = None) -> None:  # fmt: skip
    def progress(step: int, steps: int, loss: float) -> None:
        messages.put(("progress", (step, steps, loss)))

    # Ctrl-C raises KeyboardInterrupt here even where an ancestor ignored SIGINT: Python keeps an
    # inherited SIG_IGN, and then neither _stop nor _stop_when_orphaned could stop the build.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if parent is not None:
        _stop_when_orphaned(parent)
    try:
        config.choose_folders(**folders)  # the parent's, whatever its options chose: where the model goes
        messages.put(("done", str(build(data_dir, on_progress=progress))))
    except MeloInputError as exc:
        messages.put(("input error", str(exc)))
    except BaseException as exc:  # KeyboardInterrupt too: the parent says what happened
        messages.put(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))


def build_apart(build: Callable[..., Path], data_dir: str | Path, on_progress: Progress | None = None) -> Path:
    """``build(data_dir, on_progress=...)`` in a fresh process; its progress is reported here, its
    input errors are raised here as they are, and its folder is returned. The child uses this
    process's data, cache and models folders (``config.folders``). ``build`` must be
    picklable (a module's function, or a ``functools.partial`` of one). An interruption here stops
    the build, which leaves nothing half-made (builds write to a temporary folder first)."""
    # One build of a kind at a time, across processes: the second finds the model built (and its
    # export done) when the first ends, instead of building it beside it.
    with held(config.models_dir() / f".{_build_name(build)}.build.lock"):
        return _build_apart(build, data_dir, on_progress)


_starting = threading.Lock()  # bare_main swaps sys.modules["__main__"]: two threads at once would leave a fake one


def _build_name(build: Callable[..., Path]) -> str:
    function = getattr(build, "func", build)  # a functools.partial: its function
    return f"{function.__module__}.{function.__qualname__}"


def _build_apart(build: Callable[..., Path], data_dir: str | Path, on_progress: Progress | None) -> Path:
    context = multiprocessing.get_context("spawn")  # torch's threads are not fork-safe
    messages = context.Queue()
    process = context.Process(target=_build_child, args=(build, str(data_dir), config.folders(), messages, os.getpid()),
                              daemon=True)  # fmt: skip
    with _starting, bare_main():  # one start at a time: builds may start from two threads (`prepare`'s early build)
        process.start()
    try:
        while True:
            try:
                kind, payload = messages.get(timeout=1.0)
            except queue.Empty:
                if process.is_alive():
                    continue
                try:  # it may have ended just after its last message
                    kind, payload = messages.get(timeout=1.0)
                except queue.Empty:
                    raise RuntimeError(
                        f"the build process ended without a result (exit code {process.exitcode})"
                    ) from None
            if kind == "progress":
                if on_progress is not None:
                    on_progress(*payload)
            elif kind == "done":
                return Path(payload)
            elif kind == "input error":
                raise MeloInputError(payload)
            else:
                raise RuntimeError(f"the build process failed: {payload}")
    finally:
        _stop(process)


def _stop(process: multiprocessing.process.BaseProcess) -> None:
    """Waits for the child; one still running (we were interrupted) is asked to stop as Ctrl-C
    would, so that it removes its temporary folder, and killed if it does not."""
    process.join(timeout=5)
    if process.is_alive() and process.pid is not None:
        os.kill(process.pid, signal.SIGINT)
        process.join(timeout=30)
    if process.is_alive():
        process.kill()
        process.join()
