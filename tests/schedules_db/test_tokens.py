"""The token store (SQLite and PostgreSQL): shown once, stored hashed, found by hash, revoked."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import select

from schedules_db import make_engine, upgrade_schema
from schedules_db.tables import ApiTokenRow, utcnow
from schedules_db.tokens import PREFIX, TokenStore, effective_scopes, hash_token


@pytest.fixture
def tokens(store_url: str) -> Iterator[TokenStore]:
    engine = make_engine(store_url)
    upgrade_schema(engine)
    yield TokenStore(engine)
    engine.dispose()


def test_a_token_is_shown_once_and_stored_as_its_sha256(tokens: TokenStore) -> None:
    text, info = tokens.create("alice", ["submit"])
    assert text.startswith(PREFIX) and len(text) >= len(PREFIX) + 43  # 32 random bytes
    with tokens._sessions.begin() as session:  # noqa: SLF001 - look at what is stored
        row = session.scalar(select(ApiTokenRow).where(ApiTokenRow.id == info.id))
    assert row.token_sha256 == hash_token(text) and text not in str(vars(row))
    found = tokens.find(text)
    assert found is not None and found.id == info.id and found.name == "alice"
    assert found.scopes == ("submit",) and found.effective == {"submit", "read"}
    assert found.state() == "active" and found.expires_at is None
    assert tokens.find(text[:-1] + ("A" if text[-1] != "A" else "B")) is None
    assert tokens.find("not-a-token") is None
    second, _ = tokens.create("alice", ["read"])
    assert second != text  # random, not derived from the name


def test_scopes_imply_the_ones_below() -> None:
    assert effective_scopes(["admin"]) == {"admin", "submit-code", "submit", "read"}
    assert effective_scopes(["submit-code"]) == {"submit-code", "submit", "read"}
    assert effective_scopes(["submit"]) == {"submit", "read"}
    assert effective_scopes(["read"]) == {"read"}


def test_expiry_and_revocation(tokens: TokenStore) -> None:
    soon = utcnow() + timedelta(seconds=1)
    text, info = tokens.create("bob", ["read"], expires_at=soon)
    assert tokens.find(text).expires_at == soon
    assert tokens.find(text).state(now=soon + timedelta(seconds=1)) == "expired"
    a, first = tokens.create("carol", ["submit"])
    b, _ = tokens.create("carol", ["read"])
    assert [t.id for t in tokens.revoke(first.id)] == [first.id]
    assert tokens.find(a).state() == "revoked" and tokens.find(b).state() == "active"
    assert len(tokens.revoke("carol")) == 1  # every active token of the name
    assert tokens.find(b).state() == "revoked" and tokens.revoke("carol") == []
    assert [t.name for t in tokens.list()] == ["bob", "carol", "carol"]
    tokens.mark_used(info.id)
    assert tokens.find(text).last_used_at is not None


def test_bad_names_scopes_and_expiries_are_refused(tokens: TokenStore) -> None:
    past = utcnow() - timedelta(days=1)
    for name, scopes, expires_at in [
        ("local", ["read"], None),  # reserved
        ("42", ["read"], None),  # an id, not a name
        ("a b", ["read"], None),
        ("x" * 65, ["read"], None),
        ("dave", [], None),
        ("dave", ["root"], None),
        ("dave", ["read"], past),
    ]:
        with pytest.raises(ValueError):
            tokens.create(name, scopes, expires_at)
    assert tokens.list() == []
