"""Nothing a user typed reaches a browser as markup, and exports guard and check what they write
(issue 87): the markdown escaping helper (``ui.safe``), a structural guard over every page, and the
SSSOM / SKOS CSV / Turtle exports of a store holding formula-like text and IRIs that are not ones.
Real stores (SQLite, and PostgreSQL when configured), real files, the real ``sssom`` validator."""

from __future__ import annotations

import ast
import csv
import io
import re
from pathlib import Path

import pytest

from db.exports import validate_sssom
from db.store import Store
from db.testing import run_cli_ok
from tests.test_store_exports import _header_and_rows
from tests.test_store_imports import rejected

FORMULA_TERMS = {  # code -> label: cells a spreadsheet would run
    "T1": '=HYPERLINK("http://evil.example","click")',
    "T2": "+47 telefonvakt",
    "T3": "Plain label",
}
ESCO = "http://data.europa.eu/esco/occupation/"
ROOT = Path(__file__).resolve().parent.parent


def _terms(store_url: str, tmp_path: Path, scheme: str = "s") -> list[int]:
    """The formula terms imported into ``scheme``; their ids in import order."""
    source = tmp_path / "terms.csv"
    with source.open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["code", "label"])
        writer.writerows(FORMULA_TERMS.items())
    run_cli_ok("import-terms", "--scheme", scheme, "--csv", str(source), "--db", store_url)
    with Store(store_url) as store:
        return [t.id for t in store.terms(scheme)]


@pytest.fixture
def formula_store(store_url: str, tmp_path: Path) -> str:
    """Terms and decisions whose labels, curator, comment and concept label start with =, +, -, @."""
    t1, t2, t3 = _terms(store_url, tmp_path)
    with Store(store_url) as store:
        store.decide(t1, ESCO + "a1", "exactMatch", "@curator", comment="-2+3", concept_label="=1+1")
        store.decide(t2, ESCO + "b2", "narrowMatch", "bob", concept_label="@SUM(A1:A9)", scorer="=cmd", score=0.5)
        store.decide(t3, ESCO + "c3", "closeMatch", "carol", concept_label="Plain concept")
    return store_url


def _export(url: str, fmt: str, out: Path, *extra: str) -> str:
    run_cli_ok("export", "--scheme", "s", "--format", fmt, "--out", str(out), "--db", url, *extra)
    return out.read_text(encoding="utf-8")


def test_sssom_free_text_cells_are_guarded_and_the_file_still_validates(formula_store: str, tmp_path: Path) -> None:
    text = _export(formula_store, "sssom", tmp_path / "s.sssom.tsv", "--validate")
    assert validate_sssom(text) == []
    _, rows = _header_and_rows(text)
    by_subject = {r["subject_label"]: r for r in rows}
    first = by_subject["'" + FORMULA_TERMS["T1"]]
    assert (first["object_label"], first["author_label"], first["comment"]) == ("'=1+1", "'@curator", "'-2+3")
    second = by_subject["'+47 telefonvakt"]
    assert (second["object_label"], second["similarity_measure"]) == ("'@SUM(A1:A9)", "'=cmd")
    assert by_subject["Plain label"]["object_label"] == "Plain concept"  # only what a spreadsheet would run
    # The ids are CURIEs of declared prefixes: never guarded, never starting with a formula character.
    cells = [r[c] for r in rows for c in ("subject_id", "predicate_id", "object_id", "mapping_justification")]
    assert all(cell[:1].isalpha() for cell in cells)
    free_text = [v for r in rows for k, v in r.items() if not k.endswith("_id") and v]
    assert not [v for v in free_text if v[:1] in ("=", "+", "-", "@")]


def test_no_formula_guard_writes_sssom_and_skos_csv_cells_as_they_are(formula_store: str, tmp_path: Path) -> None:
    _, rows = _header_and_rows(_export(formula_store, "sssom", tmp_path / "raw.tsv", "--no-formula-guard"))
    assert {r["subject_label"] for r in rows} == set(FORMULA_TERMS.values())
    assert "@curator" in {r["author_label"] for r in rows}
    skos = _export(formula_store, "skos-csv", tmp_path / "raw.csv", "--no-formula-guard")
    labels = {row[2] for row in list(csv.reader(io.StringIO(skos, newline="")))[1:]}
    assert labels == set(FORMULA_TERMS.values())
    guarded = _export(formula_store, "skos-csv", tmp_path / "guarded.csv")
    assert "'" + FORMULA_TERMS["T1"].replace('"', '""') in guarded  # the default is unchanged
    message = rejected("export", "--scheme", "s", "--format", "turtle", "--out", str(tmp_path / "x.ttl"),
                       "--db", formula_store, "--no-formula-guard")  # fmt: skip
    assert "--no-formula-guard goes with --format skos-csv or sssom" in message
    assert not (tmp_path / "x.ttl").exists()


@pytest.mark.parametrize("fmt", ["turtle", "sssom"])
@pytest.mark.parametrize("option", ["--mapping-set-id", "--license"])
def test_an_id_that_is_not_an_absolute_iri_is_refused_before_anything_is_written(
    formula_store: str, tmp_path: Path, fmt: str, option: str
) -> None:
    out = tmp_path / "out"
    message = rejected("export", "--scheme", "s", "--format", fmt, "--out", str(out), "--db", formula_store,
                       option, "not a uri")  # fmt: skip
    assert message == f"error: {option} must be an absolute IRI (such as https://example.org/...), got 'not a uri'"
    assert not out.exists()
    _export(formula_store, fmt, out, option, "https://example.org/a-set")  # an IRI passes


@pytest.mark.parametrize("fmt", ["turtle", "sssom"])
def test_a_concept_uri_that_is_not_an_iri_is_refused_naming_the_mapping(
    store_url: str, tmp_path: Path, fmt: str
) -> None:
    t1, _, _ = _terms(store_url, tmp_path)
    with Store(store_url) as store:
        store.decide(t1, "not a uri", "exactMatch", "alice")
    out = tmp_path / "out"
    message = rejected("export", "--scheme", "s", "--format", fmt, "--out", str(out), "--db", store_url)
    assert "mapping 1 (" in message and "'not a uri'" in message
    assert not out.exists()


def test_sssom_refuses_an_object_iri_it_cannot_write_as_a_curie(store_url: str, tmp_path: Path) -> None:
    """``http://example.org/`` has nothing after its last ``/``: no CURIE of any declared prefix.
    The exporter used to write the IRI itself as ``object_id``, and ``sssom``'s validator passed it
    (it skips any value not shaped like a CURIE)."""
    t1, t2, _ = _terms(store_url, tmp_path)
    with Store(store_url) as store:
        store.decide(t1, ESCO + "a1", "exactMatch", "alice")
        store.decide(t2, "http://example.org/", "exactMatch", "alice")
    for extra in ((), ("--validate",)):
        out = tmp_path / "out.tsv"
        message = rejected("export", "--scheme", "s", "--format", "sssom", "--out", str(out), "--db", store_url,
                           *extra)  # fmt: skip
        assert message.startswith("error: mapping 2 ('+47 telefonvakt' -> 'http://example.org/'): the object_id")
        assert "cannot be written as a CURIE" in message
        assert not out.exists()
    # Turtle writes IRIs, not CURIEs: the same decision is a valid IRI there.
    assert "<http://example.org/>" in _export(store_url, "turtle", tmp_path / "s.ttl", "--validate")


def test_validate_sssom_refuses_ids_that_are_no_curie_of_the_curie_map(formula_store: str, tmp_path: Path) -> None:
    text = _export(formula_store, "sssom", tmp_path / "s.tsv")
    assert validate_sssom(text) == []
    for bad in ("http://example.org/", "'esco:a1", "nope:a1"):
        problems = validate_sssom(text.replace("esco:a1", bad))  # sssom itself names the missing prefix 'nope'
        assert f"row 1: object_id {bad!r} is not a CURIE with a prefix of the curie_map" in problems


# -- the escaping helper ----------------------------------------------------------------------------
POISON = (
    "![x](http://127.0.0.1:9/img.png)",
    "<img src=http://127.0.0.1:9/a.png>",
    "[click](javascript:alert(1))",
    "**bold** _em_ ~~struck~~ `code` $x^2$",
    "# heading\n1. list\n- item\n> quote\n    code\nline\n===\na | b\n:-",
    "R&D &amp; &#33; a\\*b",
    "see http://example.org, www.example.org or a@example.org",
    ":red[red] :blue-badge[badge] :smile: :material/home:",
)


def _rendered(markdown: str) -> str:
    """CommonMark with GFM's tables and strikethrough, as Streamlit's renderer parses it."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)


@pytest.mark.parametrize("text", POISON)
def test_md_text_renders_as_the_text_itself(text: str) -> None:
    import html
    import re

    from ui.safe import WORD_JOINER, md_text

    rendered = _rendered(md_text(text))
    assert set(re.findall(r"<(\w+)", rendered)) == {"p"}  # no image, link, code, list, heading, emphasis
    shown = html.unescape(re.sub(r"</?p>", "", rendered)).replace(WORD_JOINER, "").strip()
    lines = [line.lstrip() for line in text.splitlines()]  # leading indentation is dropped
    assert shown == "\n".join(lines)


def test_md_text_leaves_plain_text_alone() -> None:
    from ui.safe import md_text

    for plain in ("Offiserer fra fenrik og høyere grad", "nor_no", "Bäcker (m/w/d), 50% C#", "Kari's 3.5 ideas"):
        assert md_text(plain) == plain


@pytest.mark.parametrize("text", ["a`b", "``", "![x](http://h/i.png) <b>", " padded "])
def test_md_code_is_one_code_span_of_the_text(text: str) -> None:
    import html
    import re

    from ui.safe import md_code

    rendered = _rendered("x " + md_code(text))
    match = re.fullmatch(r"<p>x <code>(.*)</code></p>\n", rendered)
    assert match is not None and html.unescape(match.group(1)) == text


# -- the structural guard: every page's markdown goes through the helper -----------------------------
# Streamlit callables whose text renders as markdown, with the positional arguments that are such
# text (``help=`` and the keywords named are checked too). Selectbox and multiselect options and
# dataframe cells are plain text (checked in Chromium); radio options render markdown.
MARKDOWN_ARGUMENTS: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {
    **{name: ((0,), ("body",)) for name in ("markdown", "title", "header", "subheader", "caption", "info",
                                              "warning", "error", "success", "toast", "spinner")},
    "write": ((0, 1, 2, 3), ()),
    "metric": ((0, 1, 2), ("label", "value", "delta")),
    "progress": ((1,), ("text",)),
    "tabs": ((0,), ("tabs",)),
    "page_link": ((), ("label",)),
    **{name: ((0,), ("label",)) for name in (
        "button", "form_submit_button", "download_button", "link_button", "checkbox", "toggle", "radio",
        "selectbox", "multiselect", "text_input", "text_area", "number_input", "date_input", "time_input",
        "file_uploader", "slider", "select_slider", "expander", "popover", "pills", "segmented_control")},
}  # fmt: skip
FORMAT_FUNC_RENDERS_MARKDOWN = ("radio", "pills", "segmented_control")
ESCAPING_FUNCTIONS = ("md_text", "md_code", "md_link")
NUMBER_FUNCTIONS = ("len", "int", "float", "round", "sum", "abs", "min", "max")
DATE_METHODS = ("strftime", "isoformat")
# What may go into markdown as it is, by file: markdown the code writes itself (its own
# interpolations escaped where it is built) and the project's constant help texts.
NOT_USER_TEXT: dict[str, set[str]] = {
    "*": {"config.DATA_HELP", "catalogue_markdown()"},
    "pages/2_Link.py": {"produced_by", "meanwhile"},
    "app.py": {"page.link"},  # the page list's own link texts (ui.navigation.PAGES)
    # Intervals of numbers ("0.4233 [0.4167, 0.4301]") and the page's own wording.
    "pages/7_Drill_down.py": {"mrr.describe()", "difference", "over", "pairs"},
}


def _numeric_spec(spec: ast.expr | None) -> bool:
    """A format spec only numbers take (``:,``, ``:.3f``, ``:d``, ``:+.4f``): a string would raise."""
    if not isinstance(spec, ast.JoinedStr) or not all(isinstance(v, ast.Constant) for v in spec.values):
        return False
    text = "".join(str(v.value) for v in spec.values if isinstance(v, ast.Constant))
    return bool(re.fullmatch(r"[<>=^]?[+\- ]?#?0?\d*[,_]?(\.\d+)?[bcdeEfFgGnoxX%]", text) or text in (",", "_"))


def _unsafe_parts(node: ast.expr, allowed: set[str]) -> list[ast.expr]:
    """The parts of ``node`` that may carry user text into markdown unescaped."""
    if isinstance(node, ast.Constant):
        return []
    if ast.unparse(node) in allowed:
        return []
    if isinstance(node, ast.JoinedStr):
        return [p for v in node.values for p in _unsafe_parts(v, allowed)]
    if isinstance(node, ast.FormattedValue):
        return [] if _numeric_spec(node.format_spec) else _unsafe_parts(node.value, allowed)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _unsafe_parts(node.left, allowed) + _unsafe_parts(node.right, allowed)
    if isinstance(node, ast.IfExp):
        return _unsafe_parts(node.body, allowed) + _unsafe_parts(node.orelse, allowed)
    if isinstance(node, ast.BoolOp):
        return [p for v in node.values for p in _unsafe_parts(v, allowed)]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [p for e in node.elts for p in _unsafe_parts(e, allowed)]
    if isinstance(node, ast.Lambda):
        return _unsafe_parts(node.body, allowed)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in ESCAPING_FUNCTIONS or name in NUMBER_FUNCTIONS or name in DATE_METHODS:
            return []
        if name == "join" and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Constant):
            [items] = node.args
            element = items.elt if isinstance(items, (ast.GeneratorExp, ast.ListComp)) else items
            return _unsafe_parts(element, allowed)
    return [node]


def _markdown_calls(tree: ast.AST) -> list[tuple[ast.Call, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        funcs = [node.func.body, node.func.orelse] if isinstance(node.func, ast.IfExp) else [node.func]
        names = {f.attr for f in funcs if isinstance(f, ast.Attribute)} & set(MARKDOWN_ARGUMENTS)
        names |= {f.attr for f in funcs if isinstance(f, ast.Attribute) and f.attr.endswith("Column")}
        if names:  # (st.info if ok else st.warning)(...): both take the same text
            found.append((node, min(names)))
    return found


def _unescaped(tree: ast.AST, allowed: set[str]) -> list[tuple[int, str]]:
    """(line, expression) of each value reaching Streamlit markdown (``MARKDOWN_ARGUMENTS``, column
    labels, ``help=`` texts, radio's ``format_func``) without ``md_text``/``md_code``/``md_link``,
    unless it is a constant, a number, a date or ``allowed``."""
    problems = []
    for call, name in _markdown_calls(tree):
        positions, keywords = MARKDOWN_ARGUMENTS.get(name, ((0,), ("label",)))
        values = [a for i, a in enumerate(call.args) if i in positions]
        values += [k.value for k in call.keywords if k.arg in (*keywords, "help")]
        values += [k.value for k in call.keywords if k.arg == "format_func" and name in FORMAT_FUNC_RENDERS_MARKDOWN]
        problems += [(p.lineno, ast.unparse(p)) for v in values for p in _unsafe_parts(v, allowed)]
    return sorted(problems)


def unescaped_interpolations(path: Path) -> list[str]:
    """``file:line: expression`` for each value of ``path`` that skips the helper (``_unescaped``)."""
    relative = path.relative_to(ROOT).as_posix()
    allowed = NOT_USER_TEXT["*"] | NOT_USER_TEXT.get(relative, set())
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{relative}:{line}: {expression}" for line, expression in _unescaped(tree, allowed)]


def test_every_page_escapes_what_it_puts_into_markdown() -> None:
    files = sorted([*(ROOT / "pages").glob("*.py"), *(ROOT / "ui").glob("*.py"), ROOT / "app.py"])
    problems = [p for f in files for p in unescaped_interpolations(f)]
    assert problems == []


def test_the_guard_finds_unescaped_values() -> None:
    source = (
        "st.subheader(term.label)\n"
        "st.caption(f'Code {md_text(term.code)} of {term.scheme}, {count:,} rows, {len(x)} more')\n"
        "left.metric('Done', f'{done} / {total:d}')\n"
        "st.radio('Concept', keys, format_func=lambda k: options[k]['text'])\n"
        "st.selectbox('Term', ids, format_func=lambda i: by_id[i].label)\n"  # options are plain text: fine
        "st.button('Pick', help=str(options[o]['name']))\n"
        "(st.info if ready else st.warning)('Pipeline ' + name)\n"
        "st.markdown('; '.join(f'**{c.author}**' for c in comments))\n"
        "st.column_config.NumberColumn(name, help=f'{md_text(a)} {b:.3f}')\n"
    )
    assert _unescaped(ast.parse(source), set()) == [
        (1, "term.label"), (2, "term.scheme"), (3, "done"), (4, "options[k]['text']"),
        (6, "str(options[o]['name'])"), (7, "name"), (8, "c.author"), (9, "name"),
    ]  # fmt: skip


def test_no_page_uses_what_fetches_or_renders_html() -> None:
    """Images (``st.image``, ``ImageColumn``) fetch their URL and HTML (``st.html``, components,
    ``unsafe_allow_html``) is not escaped: none of them is used, so none can carry what a user typed;
    the one component (ui/link_keys.py) renders no text at all.
    Dataframe cells are text; ``LinkColumn`` links are clicked, not fetched (and Streamlit drops
    ``javascript:`` ones)."""
    fetching = {"image", "ImageColumn", "html", "iframe"}
    found = []
    for path in sorted([*(ROOT / "pages").glob("*.py"), *(ROOT / "ui").glob("*.py"), ROOT / "app.py"]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in fetching:
                found.append(f"{path.name}:{node.lineno}: {node.func.attr}")
            if isinstance(node, ast.keyword) and node.arg == "unsafe_allow_html":
                found.append(f"{path.name}: unsafe_allow_html")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamlit.components"):
                found.append(f"{path.name}: {node.module}")
    # One local component, with inline script only: the Link page's number keys. It shows nothing.
    assert found == ["link_keys.py: streamlit.components.v2"]
