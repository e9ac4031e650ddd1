"""What a sentence-transformers folder says about itself, read without sentence-transformers: its
modules, its JSON files, the prompt each role reads. The readers that run such folders without
torch (``static_embedding.py``, ``onnx_transformer.py``) take a folder only when these allow it."""

from __future__ import annotations

import json
from pathlib import Path

from melo_core.encoders.base import EncoderSpec, Role


def read_json(path: Path) -> dict:
    """The object in ``path``; {} when it is missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def module_types(folder: Path) -> list[tuple[str, str]]:
    """(class name, subfolder) of each module in ``modules.json``; [] when there is none."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        return [(str(m["type"]).rsplit(".", 1)[-1], str(m.get("path", ""))) for m in modules]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def role_prompts(spec: EncoderSpec, folder: Path) -> dict[Role, str] | None:
    """The prompt text each role reads, as sentence-transformers chooses it (the named prompt, else
    the folder's default, else none); None when a prompt name asked for is not defined there (left
    to sentence-transformers, which names the problem)."""
    config = read_json(folder / "config_sentence_transformers.json")
    prompts, default = dict(config.get("prompts") or {}), config.get("default_prompt_name")
    names = spec.prompt_names()
    if any(name is not None and name not in prompts for name in names.values()):
        return None
    return {role: prompts.get(name or default or "", "") for role, name in names.items()}
