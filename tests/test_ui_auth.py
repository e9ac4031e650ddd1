"""When the app asks to sign in (ui.auth.sign_in_required): a server.address beyond loopback, or
MELO_AUTH=on."""

from __future__ import annotations

import pytest
import streamlit as st

from ui.auth import is_loopback, session_hours, sign_in_required


@pytest.mark.parametrize(
    ("address", "loopback"),
    [("127.0.0.1", True), ("localhost", True), ("::1", True), ("127.0.1.1", True), ("0.0.0.0", False),
     ("192.168.1.20", False), ("", False), (None, False), ("example.org", False)],
)  # fmt: skip
def test_loopback_addresses(address: str | None, loopback: bool) -> None:
    assert is_loopback(address) is loopback


def test_sign_in_required_by_address_or_melo_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    address = {"value": "127.0.0.1"}
    monkeypatch.setattr(st, "get_option", lambda name: address["value"] if name == "server.address" else None)
    monkeypatch.delenv("MELO_AUTH", raising=False)
    assert not sign_in_required()
    monkeypatch.setenv("MELO_AUTH", "on")
    assert sign_in_required()
    monkeypatch.setenv("MELO_AUTH", "off")
    assert not sign_in_required()
    address["value"] = "0.0.0.0"  # shared on the network: MELO_AUTH=off does not open it
    assert sign_in_required()


def test_session_hours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MELO_SESSION_HOURS", "0.5")
    assert session_hours() == 0.5
    for bad in ("soon", "-1", "0"):
        monkeypatch.setenv("MELO_SESSION_HOURS", bad)
        assert session_hours() == 12
