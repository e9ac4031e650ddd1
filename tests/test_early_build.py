"""`prepare` builds the costliest later model a first suggestion waits for (e5-esco) beside the first
(the domain model), each in a process of its own (melo_core.linking.pipeline.EarlyBuild)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from melo_core import config
from melo_core.encoders import registry
from melo_core.encoders.registry import BuiltModel
from melo_core.errors import MeloInputError
from melo_core.linking.pipeline import EarlyBuild, Requirement, _build


def _folder(name: str) -> Path:
    return config.models_dir() / name


def toy_build(data_dir: str, on_progress: object = None, name: str = "toy-first") -> Path:
    """A model build of about a second that notes when it ran (module level: spawn pickles it)."""
    folder = _folder(name)
    started = time.time()
    for step in range(1, 6):
        time.sleep(0.25)
        if callable(on_progress):
            on_progress(step, 5, 0.0)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ran.json").write_text(json.dumps([started, time.time()]), encoding="utf-8")
    (folder / "modules.json").write_text("[]", encoding="utf-8")
    return folder


def toy_build_second(data_dir: str, on_progress: object = None) -> Path:
    return toy_build(data_dir, on_progress, name="toy-second")


def toy_build_failing(data_dir: str, on_progress: object = None) -> Path:
    raise MeloInputError("toy: no labels to train on")


FIRST = BuiltModel("toy-first", "toy first model", lambda: _folder("toy-first"), toy_build, 10.0)
SECOND = BuiltModel("toy-second", "toy second model", lambda: _folder("toy-second"), toy_build_second, 60.0)
FAILING = BuiltModel("toy-failing", "toy failing model", lambda: _folder("toy-failing"), toy_build_failing, 60.0)


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MELO_MODELS", str(tmp_path / "models"))
    for model in (FIRST, SECOND, FAILING):  # registered for this test only
        monkeypatch.setitem(registry._BUILT, model.kind, model)
    monkeypatch.setattr("melo_core.linking.pipeline.encoder_kinds", lambda: ["toy-first", "toy-second", "toy-failing"])
    return tmp_path


def need(model: BuiltModel) -> Requirement:
    return Requirement(model.what, False, seconds=model.seconds)


def test_the_second_model_is_built_beside_the_first_and_reports_its_steps(models: Path) -> None:
    first, second = need(FIRST), need(SECOND)
    labels = Requirement("toy labels", False, seconds=5.0, encoder="toy-first", part="labels")
    early = EarlyBuild.start([first, labels, second], models)
    assert early is not None and early.need is second and early.running()
    _build(first, None, None, [], models / "cache", models, 1, lambda done, message: None)  # type: ignore[arg-type]
    said: list[str] = []
    assert early.join(lambda done, message: said.append(message)) == (0, "steps")  # shared cores: no pace kept
    ran = {name: json.loads((_folder(name) / "ran.json").read_text()) for name in ("toy-first", "toy-second")}
    assert ran["toy-second"][0] < ran["toy-first"][1]  # it started before the first had ended
    assert all(m.startswith("building the toy second model: step ") for m in said)


def test_one_model_or_a_failing_early_build(models: Path) -> None:
    assert EarlyBuild.start([need(FIRST)], models) is None  # nothing to build beside
    early = EarlyBuild.start([need(FIRST), need(FAILING)], models)
    assert early is not None
    with pytest.raises(MeloInputError, match="no labels to train on"):  # raised where the stages reach it
        early.join(lambda done, message: None)
