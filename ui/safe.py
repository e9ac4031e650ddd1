"""Text that users typed, shown by Streamlit as that text and never as markup.

Streamlit renders markdown in ``st.markdown``, ``st.caption``, headers, alerts, toasts and in the
labels of most widgets (buttons, expanders, tabs, metrics, radio options, ``help`` tooltips); an
image there (``![x](http://host/img.png)``) makes every browser showing the page fetch its URL.
Term labels, descriptions, concept labels, curator names, comments, scheme names, error messages
quoting them and URL parameters are written anywhere they land in such text through ``md_text``
(``md_code`` for code, ``md_link`` for a link). Selectbox and multiselect options and dataframe
cells are plain text already and need nothing. ``tests/test_trust_rendering.py`` checks every
page for interpolations that skip it.

No Streamlit here, so the rules can be tested on their own."""

from __future__ import annotations

import re

# Escaped wherever they are: they open inline markup (emphasis, code, links and images, HTML,
# autolinks, strikethrough, LaTeX, tables) or escape the next character.
_ALWAYS = re.compile(r"([\\`*\[\]<>~$|])")
# Block markup only counts at the start of a line: headings, lists, setext and table underlines.
# Indentation goes: four spaces make a code block, which shows the escapes' backslashes.
_INDENT = re.compile(r"^[ \t]+", re.MULTILINE)
_LINE_START = re.compile(r"^([#+\-=:]|\d+[.)])", re.MULTILINE)
# "_" emphasises only at a word's edge ("nor_no" stays as it is); "&" only as an entity (&lt;).
_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
_ENTITY = re.compile(r"&(?=#?\w+;)")
# Streamlit finds these in the parsed text, where no backslash is left: bare URLs and www. names
# become links, ":red[x]" coloured text or a badge, ":smile:" an emoji. An invisible word joiner
# (U+2060) breaks each pattern; the text reads the same. E-mail addresses stay mailto: links: a
# user name often is one, and it must read (and be found) exactly.
WORD_JOINER = "\u2060"
_PATTERNS = re.compile(
    r"(?<=[A-Za-z])(?=://)"  # http://, ftp://
    r"|(?<=www)(?=\.)"  # www.example.org
    r"|(?<=:)(?=[\w+-]+(?:/[\w-]+)?(?::|\\\[))",  # :smile:, :material/home:, :red\[ (escaped by then)
    re.IGNORECASE,
)


def md_text(value: object) -> str:
    """``value`` (``str()`` of it) as Streamlit markdown that shows exactly its text: markdown and
    HTML syntax backslash-escaped (which CommonMark allows before any ASCII punctuation), so no
    image, link, HTML, heading, list or emphasis can come of it; indentation at the start of a
    line is dropped (it would make a code block). What Streamlit finds after parsing (bare
    URLs, ``:red[...]`` and badges, ``:smile:``) gets an invisible word joiner (``WORD_JOINER``)
    that breaks the pattern."""
    text = _ALWAYS.sub(r"\\\1", _INDENT.sub("", str(value)))
    text = _UNDERSCORE.sub(r"\\_", text)
    text = _ENTITY.sub(r"\\&", text)
    text = _LINE_START.sub(_escape_block_marker, text)
    return _PATTERNS.sub(WORD_JOINER, text)


def _escape_block_marker(match: re.Match[str]) -> str:
    marker = match.group(1)
    if marker[0].isdigit():  # "1." or "1)": an ordered list; the digits are no syntax
        return marker[:-1] + "\\" + marker[-1]
    return "\\" + marker


def md_code(value: object) -> str:
    """``value`` as an inline code span: nothing inside one is markup, so only a backtick in the
    text matters (the fence gets one more backtick than its longest run). Empty: nothing."""
    text = " ".join(str(value).splitlines())
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") or text.strip() != text else text
    return f"{fence}{padded}{fence}"


# A link target written as is: http(s) only (no javascript:), and nothing that could end the link.
_LINKABLE = re.compile(r"^https?://[^\s<>()\[\]\\`\"']+$", re.IGNORECASE)


def md_link(text: object, url: str) -> str:
    """A markdown link to ``url`` showing ``text``; a URL that is not a plain http(s) one (it came
    from an imported file) is shown as code after the text instead of being linked."""
    if _LINKABLE.match(url):
        return f"[{md_text(text)}]({url})"
    return f"{md_text(text)} {md_code(url)}"
