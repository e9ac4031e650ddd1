"""Who is curating: on a shared app a signed-in user, else the typed name.

Sign-in is required when the app listens beyond this machine (``server.address`` not loopback)
or ``MELO_AUTH=on``. Then a user signs in through OpenID Connect (Streamlit's ``st.login``, when
``[auth]`` is configured in ``.streamlit/secrets.toml``), else with a local account of the store
(``python -m melo_core users add NAME``). The signed-in user lives in the session state until
``MELO_SESSION_HOURS`` (default 12) have passed; then the app asks again. The store checks the
user on every write too (``db.store.accounts``): the page is not the only guard."""

from __future__ import annotations

import ipaddress
import os
from datetime import UTC, datetime

import streamlit as st

from db.store import AccessError, Actor, Decision, SignInFailed, SignInRequired, Store, actor_name
from db.store.accounts import DEFAULT_SESSION_HOURS
from melo_core.files.text_limits import check_name
from ui.safe import md_text

SESSION_KEY = "melo_actor"
MESSAGE_KEY = "melo_sign_in_message"
NAME_KEY = "curator"  # the typed name where sign-in is not required


def is_loopback(address: str | None) -> bool:
    """Whether Streamlit listens on this machine only (an unset address listens everywhere)."""
    if not address:
        return False
    if address.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def sign_in_required() -> bool:
    """``MELO_AUTH=on``, or ``server.address`` is not a loopback address."""
    if os.environ.get("MELO_AUTH", "").strip().lower() in ("on", "1", "true", "yes"):
        return True
    return not is_loopback(st.get_option("server.address"))


def session_hours() -> float:
    try:
        hours = float(os.environ.get("MELO_SESSION_HOURS", DEFAULT_SESSION_HOURS))
    except ValueError:
        return DEFAULT_SESSION_HOURS
    return hours if hours > 0 else DEFAULT_SESSION_HOURS


def oidc_configured() -> bool:
    """Whether ``[auth]`` in the secrets configures OpenID Connect for ``st.login``."""
    try:
        auth = st.secrets.get("auth")
    except Exception:  # no secrets file at all
        return False
    return bool(auth and "redirect_uri" in auth and "cookie_secret" in auth)


def _oidc_identity() -> str | None:
    try:
        user = dict(st.user)
    except Exception:
        return None
    if not user.get("is_logged_in"):
        return None
    return str(user.get("email") or user.get("sub") or "") or None


def sign_out(message: str | None = None) -> None:
    """Forget the signed-in user (and say why on the next sign-in form)."""
    st.session_state.pop(SESSION_KEY, None)
    if message:
        st.session_state[MESSAGE_KEY] = message


def refused(exc: AccessError) -> str:
    """A write the store refused: sign out when the session is no longer valid; the message."""
    if isinstance(exc, SignInRequired):
        sign_out(str(exc))
    return str(exc)


def _valid(store: Store, actor: Actor) -> bool:
    try:
        store.check_actor(actor)
    except AccessError as exc:
        sign_out(f"{exc}.")
        return False
    return True


def _sidebar(actor: Actor) -> None:
    with st.sidebar:
        until = actor.expires_at.astimezone(UTC).strftime("%H:%M UTC")
        st.markdown(f"Signed in as **{md_text(actor.username)}** ({md_text(actor.role)}) · until {md_text(until)}")
        if st.button("Sign out", key="sign_out"):
            sign_out()
            if actor.via == "oidc":
                # Leaves the page for the provider's logout; a rerun here would drop that redirect
                # and keep the identity cookie, signing the user in again on the next visit.
                st.logout()
                st.stop()
            st.rerun()


def _sign_in_form(store: Store) -> None:
    st.subheader("Sign in")
    if message := st.session_state.pop(MESSAGE_KEY, None):
        st.warning(md_text(message))
    if oidc_configured():
        st.caption("Decisions are recorded under the identity your organisation's sign-in gives.")
        if st.button("Sign in with your organisation's account", type="primary", key="sign_in_oidc"):
            try:
                st.login()
            except Exception as exc:  # e.g. Authlib missing, or an [auth] section Streamlit refuses
                st.error(f"Sign-in through OpenID Connect is misconfigured: {md_text(exc)}")
        st.stop()
    st.caption("This app is shared: decisions are recorded under your account. An administrator adds "
               "accounts with `python -m melo_core users add NAME`.")  # fmt: skip
    with st.form("sign_in_form"):
        username = st.text_input("User name", key="sign_in_user")
        password = st.text_input("Password", type="password", key="sign_in_password")
        submitted = st.form_submit_button("Sign in", type="primary")
    if submitted:
        try:
            actor = store.sign_in(username, password, session_hours())
        except SignInFailed as exc:
            st.error(f"{md_text(exc)}.")
        else:
            st.session_state[SESSION_KEY] = actor
            st.session_state.pop("sign_in_password", None)
            st.rerun()
    st.stop()


def current_user(store: Store) -> Actor | str:
    """Who acts on this page: the signed-in ``Actor`` where sign-in is required (the sign-in form
    stops the page until then), else the curator's typed name, asked once and kept in the address."""
    if not store.sign_in_required:
        return _typed_name()
    actor = st.session_state.get(SESSION_KEY)
    if isinstance(actor, Actor):
        if actor.expires_at <= datetime.now(UTC):
            sign_out("Your session has expired: sign in again.")
            if actor.via == "oidc":
                st.logout()
        elif _valid(store, actor):
            _sidebar(actor)
            return actor
    if oidc_configured() and (identity := _oidc_identity()) and MESSAGE_KEY not in st.session_state:
        try:
            actor = store.oidc_actor(identity, session_hours())
        except (SignInFailed, ValueError) as exc:
            sign_out(f"{exc}.")
        else:
            st.session_state[SESSION_KEY] = actor
            _sidebar(actor)
            return actor
    _sign_in_form(store)
    raise RuntimeError  # unreachable: st.stop() raises


def require_sign_in(store: Store) -> Actor | None:
    """On a shared app, the signed-in user (the sign-in form stops the page until then); None
    where sign-in is not required. For pages that write without naming a curator (imports,
    evaluation runs)."""
    if not store.sign_in_required:
        return None
    who = current_user(store)
    return who if isinstance(who, Actor) else None


def _typed_name() -> str:
    # The name also rides in the address (?curator=...): reloading the page or opening a link
    # to it keeps the curator, where the session state alone would ask again.
    name = st.session_state.get(NAME_KEY) or st.query_params.get(NAME_KEY, "").strip()
    problem = None
    if name:
        try:  # NFC, no invisible or bidi characters: the name a decision records
            name = check_name(name, "curator name")
        except ValueError as exc:
            problem, name = str(exc), ""
            st.session_state.pop(NAME_KEY, None)
            st.query_params.pop(NAME_KEY, None)
    if name:
        st.session_state[NAME_KEY] = name
        if st.query_params.get(NAME_KEY) != name:
            st.query_params[NAME_KEY] = name
        with st.sidebar:
            st.markdown(f"Curator: **{md_text(name)}**")  # it may come from a link: ?curator=...
            if st.button("Change curator", key="change_curator"):
                del st.session_state[NAME_KEY]
                st.query_params.pop(NAME_KEY, None)
                st.rerun()
        return name
    st.subheader("Who is curating?")
    if problem:
        st.error(f"{md_text(problem)}: type your name again.")
    with st.form("curator_form"):
        typed = st.text_input("Your name (recorded with every decision)", key="curator_input")
        if st.form_submit_button("Start") and typed.strip():
            try:
                st.session_state[NAME_KEY] = check_name(typed.strip(), "curator name")
            except ValueError as exc:
                st.error(f"{md_text(exc)}.")
            else:
                st.rerun()
    st.stop()
    raise RuntimeError  # unreachable: st.stop() raises


def name(who: Actor | str) -> str:
    """The name a decision by ``who`` records."""
    return actor_name(who)


def claimed(decision: Decision) -> str:
    """What an imported decision's file claimed about it, unverified ("bob, 1999-01-01"; empty
    for a decision made here, or a file that named nobody): its ``curator`` is who imported it."""
    when = decision.original_date.strftime("%Y-%m-%d") if decision.original_date else ""
    return ", ".join(part for part in (decision.original_author or "", when) if part)


def signed(decision: Decision) -> str:
    """Who a decision names, for a history: its curator, marked when imported, with what the
    file claimed ("alice, imported; the file says bob, 1999-01-01")."""
    if decision.imported_by is None:
        return decision.curator
    claim = claimed(decision)
    return f"{decision.curator}, imported" + (f"; the file says {claim}" if claim else "")


def role(who: Actor | str) -> str | None:
    """The signed-in user's role; None for a typed name (no roles where sign-in is not required)."""
    return who.role if isinstance(who, Actor) else None
