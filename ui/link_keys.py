"""The Link page's number keys, handled in the browser: 1–9 and 0 check the candidate of that rank in
the page's "Concept" radio at once, with no round trip to the server.

Why: a number key used to press a "Pick" button, whose callback set the radio on the server. A
relation key pressed before that rerun came back submitted the form with the radio value the
browser still held (Streamlit sends the browser's widget values with each trigger, and they win over
what a callback set), so "2" then "B" saved candidate 1 as broadMatch. Here the radio lives in a form,
so checking it in the browser sends nothing; the relation key (a form submit button's shortcut)
then submits exactly the radio value the curator sees. Streamlit's shortcuts are silent while the
focus is on any input, a radio option the mouse checked included: there the relation letters press
their submit button from here.

The component shows nothing: no text of ours or of the store reaches the page through it, so it
cannot carry markup (tests/test_trust_rendering.py allows this one component and no other)."""

from __future__ import annotations

from streamlit.components.v2 import component

# Keys typed into a text box are text; modifier chords belong to the browser. Mounted at the same place
# on every run, the component stays while terms change, and finds the term's radio and buttons by the
# start of their keys: no moment without a listener, none listening to a term no longer shown.
_JS = """
export default function ({ data }) {
  const keys = "1234567890";
  const typing = (element) => element && (element.isContentEditable
    || element.tagName === "TEXTAREA" || element.tagName === "SELECT"
    || (element.tagName === "INPUT" && !["radio", "checkbox", "button", "submit"].includes(element.type)));
  const find = (prefix) => document.querySelector('[class*="st-key-' + prefix + '"]');
  const onKey = (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
    const target = event.composedPath()[0];
    const submit = data.submits[event.key.toLowerCase()];
    if (submit && !event.shiftKey && target && target.tagName === "INPUT" && target.type === "radio") {
      const button = find(submit)?.querySelector("button");
      if (button) {
        event.preventDefault();
        event.stopPropagation();  // pressed once, should Streamlit's shortcuts ever act on radios too
        button.click();
      }
      return;
    }
    const index = keys.indexOf(event.key);
    if (index < 0 || typing(target)) return;
    const option = find(data.choice)?.querySelectorAll('input[type="radio"]')[index];
    // Only a ranked candidate has a number; a found concept (🔎) after them has none.
    if (!option || option.closest("label")?.textContent.trim().startsWith("🔎")) return;
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
  document.body.dataset.meloNumberKeys = "on";  // listening: a browser test waits for it
  return off;
}
"""

_number_keys = component("melo_link_number_keys", js=_JS)


def number_keys(choice: str, submits: dict[str, str]) -> None:
    """Let keys 1–9 and 0 check the ranked options of the radio whose key starts with ``choice``;
    ``submits``: letter -> start of the key of the form submit button it presses while the focus
    is on that radio. Call it at the same place on every run (the page's top)."""
    data = {"choice": choice, "submits": {letter.lower(): key for letter, key in submits.items()}}
    _number_keys(key="link_number_keys", data=data)
