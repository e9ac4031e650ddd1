"""Accounts of a shared app and who acts: local accounts sign in with a password (stored as an
scrypt hash with a salt of its own, never as text), OpenID Connect users by their identity.

Every write that records a person (decide, undo, review, comment) names them by an ``Actor``
(a signed-in user: ``sign_in``, ``oidc_actor``) or, in a store opened without ``sign_in``, by a
typed name. The store checks an ``Actor`` on every write: the session has not expired, the account
exists and is enabled, and its role (read again from the database) allows the action.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import unicodedata
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import ROLES, AccountRow, utcnow
from db.store.base import StoreBase
from db.store.records import Account, Actor
from melo_core.files.text_limits import check_name

# scrypt cost: 2**14 x 8 x 1 takes about 16 MiB and a few dozen ms per sign-in.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
MIN_PASSWORD = 8
DEFAULT_SESSION_HOURS = 12.0


class AccessError(PermissionError):
    """Refused because of who asks: the message says what to do."""


class SignInRequired(AccessError):
    """No valid session: nobody signed in, the session expired, or the account was disabled."""


class SignInFailed(AccessError):
    """A wrong user name or password, or a disabled account."""


class NotAllowed(AccessError):
    """Signed in, but the role or the ownership does not allow it."""


def hash_password(password: str) -> str:
    """``scrypt$N$r$p$salt$hash`` (base64): what the store keeps instead of the password."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=32)
    encode = base64.b64encode
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${encode(salt).decode()}${encode(digest).decode()}"


def verify_password(password: str, stored: str) -> bool:
    try:
        kind, n, r, p, salt, digest = stored.split("$")
        if kind != "scrypt":
            return False
        expected = base64.b64decode(digest)
        got = hashlib.scrypt(password.encode("utf-8"), salt=base64.b64decode(salt), n=int(n), r=int(r), p=int(p),
                             dklen=len(expected))  # fmt: skip
    except ValueError:
        return False
    return hmac.compare_digest(got, expected)


_DUMMY_HASH = hash_password(secrets.token_hex(8))  # unknown users cost as much as known ones


def check_username(username: str) -> str:
    """``username`` NFC-normalised (``alice`` typed in NFD is ``alice``), after refusing what
    could make two names look alike: invisible, format (zero-width) and bidi characters."""
    if username.strip() != username or not username:
        raise ValueError(f"user name {username!r}: 1 to 200 characters, no surrounding spaces, tabs or line breaks")
    name = check_name(username, "user name")
    if any(c.isspace() and c != " " for c in name):
        raise ValueError(f"user name {username!r}: 1 to 200 characters, no surrounding spaces, tabs or line breaks")
    if name.startswith("import:"):
        raise ValueError(f"user name {username!r}: names starting with 'import:' are the importers'")
    return name


def check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise ValueError(f"a password needs at least {MIN_PASSWORD} characters")


def account_record(row: AccountRow) -> Account:
    return Account(row.username, row.role, row.disabled, row.password_hash is not None, row.created_at)


def acting_as(session: Session, who: Actor | str, sign_in_required: bool, *, role: str | None = None) -> str:
    """The name a write records for ``who``, after checking it may act (``role``: the role it needs
    when signed in). A typed name is accepted only where sign-in is not required."""
    if isinstance(who, Actor):
        if who.expires_at <= utcnow():
            raise SignInRequired("your session has expired: sign in again")
        row = session.scalars(select(AccountRow).where(AccountRow.username == who.username)).first()
        if row is None:
            raise SignInRequired(f"no account {who.username!r}: sign in again")
        if row.disabled:
            raise SignInRequired(f"the account {who.username!r} is disabled: ask an administrator")
        if role is not None and row.role != role:
            raise NotAllowed(f"{who.username} is a {row.role}; only a {role} may do this")
        return row.username
    if sign_in_required:
        raise SignInRequired("sign in first: this store records only signed-in users")
    name = who.strip() if isinstance(who, str) else ""
    if not name:
        raise ValueError("a decision needs a curator")
    return check_name(name, "curator name")


def actor_name(who: Actor | str) -> str:
    return who.username if isinstance(who, Actor) else unicodedata.normalize("NFC", who.strip())


def lookup_name(username: str) -> str:
    """A typed user name as accounts are stored: stripped and NFC-normalised."""
    return unicodedata.normalize("NFC", username.strip())


class AccountQueries(StoreBase):
    """Accounts, sign-in and sessions."""

    def add_account(self, username: str, role: str = "curator", password: str | None = None) -> Account:
        """A new account: local with ``password``, else one that signs in through OpenID Connect."""
        name = check_username(username)
        if role not in ROLES:
            raise ValueError(f"role {role!r}: one of {', '.join(ROLES)}")
        if password is not None:
            check_password(password)
        with self.write() as s:
            if s.scalars(select(AccountRow).where(AccountRow.username == name)).first() is not None:
                raise ValueError(f"an account {name!r} exists already")
            row = AccountRow(username=name, role=role, password_hash=None if password is None else hash_password(password),
                             disabled=False, created_at=utcnow())  # fmt: skip
            s.add(row)
            s.flush()
            return account_record(row)

    def set_disabled(self, username: str, disabled: bool = True) -> Account:
        """Disable (or enable again) an account: a disabled one can neither sign in nor act, even
        in a session that started before."""
        with self.write() as s:
            row = s.scalars(select(AccountRow).where(AccountRow.username == lookup_name(username))).first()
            if row is None:
                raise KeyError(f"no account {username!r}")
            row.disabled = disabled
            s.flush()
            return account_record(row)

    def account(self, username: str) -> Account | None:
        with self.read() as s:
            row = s.scalars(select(AccountRow).where(AccountRow.username == lookup_name(username))).first()
            return None if row is None else account_record(row)

    def accounts(self) -> list[Account]:
        with self.read() as s:
            return [account_record(r) for r in s.scalars(select(AccountRow).order_by(AccountRow.username))]

    def sign_in(self, username: str, password: str, hours: float = DEFAULT_SESSION_HOURS) -> Actor:
        """The signed-in user for a user name and password, valid for ``hours``; ``SignInFailed``
        with a message for the user otherwise (the same for an unknown name and a wrong password)."""
        with self.read() as s:
            row = s.scalars(select(AccountRow).where(AccountRow.username == lookup_name(username))).first()
            stored = row.password_hash if row is not None else None
            if not verify_password(password, stored or _DUMMY_HASH) or row is None or stored is None:
                if row is not None and stored is None:
                    raise SignInFailed(f"{row.username} signs in through the identity provider, not with a password")
                raise SignInFailed("wrong user name or password")
            if row.disabled:
                raise SignInFailed(f"the account {row.username!r} is disabled: ask an administrator")
            return Actor(row.username, row.role, utcnow() + timedelta(hours=hours), "password")

    def oidc_actor(self, identity: str, hours: float = DEFAULT_SESSION_HOURS) -> Actor:
        """The signed-in user for an identity the OpenID Connect provider vouched for (its e-mail,
        else its subject). A first sign-in creates a curator account without a password; an
        administrator makes it a reviewer (``users add`` beforehand) or disables it."""
        name = check_username(identity.strip())
        with self.write() as s:
            row = s.scalars(select(AccountRow).where(AccountRow.username == name)).first()
            if row is None:
                row = AccountRow(username=name, role="curator", password_hash=None, disabled=False,
                                 created_at=utcnow())  # fmt: skip
                s.add(row)
                s.flush()
            if row.disabled:
                raise SignInFailed(f"the account {row.username!r} is disabled: ask an administrator")
            return Actor(row.username, row.role, utcnow() + timedelta(hours=hours), "oidc")

    def check_actor(self, who: Actor | str) -> str:
        """The name ``who`` acts under, or the ``AccessError`` a write by them would raise."""
        with self.read() as s:
            return acting_as(s, who, self.sign_in_required)

    @staticmethod
    def session_left(actor: Actor, now: datetime | None = None) -> timedelta:
        return actor.expires_at - (now or utcnow())
