"""The Link page's number keys, handled in the browser: 1–9 and 0 check the candidate of that rank in
the page's "Concept" radio at once, with no round trip to the server.

Why: a number key used to press a "Pick" button, whose callback set the radio on the server. A
relation key pressed before that rerun came back submitted the form with the radio value the
browser still held (Streamlit sends the browser's widget values with each trigger, and they win over
what a callback set), so "2" then "B" saved candidate 1 as broadMatch. Here the radio lives in a form,
so checking it in the browser sends nothing; the relation key (a form submit button's shortcut)
then submits exactly the radio value the curator sees.

The component shows nothing: no text of ours or of the store reaches the page through it, so it
cannot carry markup (tests/test_trust_rendering.py allows this one component and no other)."""

from __future__ import annotations

from streamlit.components.v2 import component

# Keys typed into a text box are text; modifier chords belong to the browser. The listener is held on
# `window`, so that each rendering replaces the previous one's (one listener, the latest radio).
_JS = """
export default function ({ data }) {
  const keys = "1234567890";
  const typing = (element) => element && (element.isContentEditable
    || element.tagName === "TEXTAREA" || element.tagName === "SELECT"
    || (element.tagName === "INPUT" && !["radio", "checkbox", "button", "submit"].includes(element.type)));
  const onKey = (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
    const index = keys.indexOf(event.key);
    if (index < 0 || index >= data.ranked || typing(event.composedPath()[0])) return;
    const radio = document.querySelector(".st-key-" + CSS.escape(data.choiceKey));
    const option = radio ? radio.querySelectorAll('input[type="radio"]')[index] : null;
    if (!option) return;
    event.preventDefault();
    if (!option.checked) option.click();
  };
  if (window.meloLinkKeysOff) window.meloLinkKeysOff();
  document.addEventListener("keydown", onKey, true);
  const off = () => {
    document.removeEventListener("keydown", onKey, true);
    if (window.meloLinkKeysOff === off) window.meloLinkKeysOff = null;
  };
  window.meloLinkKeysOff = off;
  return off;
}
"""

_number_keys = component("melo_link_number_keys", js=_JS)


def number_keys(choice_key: str, ranked: int) -> None:
    """Let keys 1–9 and 0 check the first ``ranked`` (at most 10) options of the radio keyed ``choice_key``."""
    _number_keys(key=f"{choice_key}_keys", data={"choiceKey": choice_key, "ranked": min(ranked, 10)})
