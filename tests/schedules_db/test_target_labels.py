"""A target's label names one target (issue 14, label shadowing), on SQLite and PostgreSQL."""

from __future__ import annotations

import multiprocessing

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.keys import TARGET_LABEL_LENGTH, target_key, target_labels

HOST = {"keys": ["cpu"], "kind": "llvm", "mcpu": "znver4", "num-cores": 2}
# The shadow: the same target with an explicit mtriple, which got the host's label.
SHADOW = {**HOST, "mtriple": "x86_64-pc-linux-gnu"}


def test_a_second_target_with_a_taken_label_gets_a_suffix(store: Store) -> None:
    host = store.catalog.get_or_create_target(HOST, "llvm", "znver4-2c", {})
    shadow = store.catalog.get_or_create_target(SHADOW, "llvm", "znver4-2c", {})
    assert host.label == "znver4-2c"
    assert shadow.label == f"znver4-2c-{target_key(SHADOW)[:8]}"
    # Each label names its own target; asking again changes nothing.
    assert store.catalog.find_target("znver4-2c").id == host.id
    assert store.catalog.find_target(shadow.label).id == shadow.id
    assert store.catalog.get_or_create_target(SHADOW, "llvm", "znver4-2c", {}).id == shadow.id
    labels = [row.label for row in store.catalog.list_targets()]
    assert len(labels) == len(set(labels)) == 2


def test_the_database_refuses_a_duplicate_label(store: Store) -> None:
    """The uniqueness is the database's (an index), not only the store's habit."""
    store.catalog.get_or_create_target(HOST, "llvm", "znver4-2c", {})
    with pytest.raises(IntegrityError), store.session() as s:
        s.execute(
            text(
                "INSERT INTO targets (key, canonical_json, kind, label, fingerprint) "
                "VALUES ('k2', '{}', 'llvm', 'znver4-2c', '{}')"
            )
        )


def test_taken_suffixes_and_overlong_labels_still_give_a_unique_label(store: Store) -> None:
    key = target_key(SHADOW)
    store.catalog.get_or_create_target(HOST, "llvm", "znver4-2c", {})
    # Another target already holds the 8-digit suffix this one would get.
    store.catalog.get_or_create_target(
        {"kind": "llvm", "mcpu": "x"}, "llvm", f"znver4-2c-{key[:8]}", {}
    )
    assert store.catalog.get_or_create_target(SHADOW, "llvm", "znver4-2c", {}).label == (
        f"znver4-2c-{key[:12]}"
    )
    long_label = "generic" + "-no-feature" * 20  # longer than the column
    row = store.catalog.get_or_create_target(
        {"kind": "llvm", "mattr": ["-f"]}, "llvm", long_label, {}
    )
    assert len(row.label) == TARGET_LABEL_LENGTH and row.label.startswith("generic-no-feature")
    assert row.label.endswith(row.key[:8])
    assert target_labels("a", "0123456789abcdef" * 2)[:2] == ["a", "a-01234567"]


def _create_in_child(url: str, barrier, results, child: int) -> None:  # noqa: ANN001
    engine = make_engine(url)
    store = Store(engine)
    barrier.wait()
    ids = {}
    for n in range(3):  # the shared target, then two of this child's own, all one label
        canonical = HOST if n == 0 else {**HOST, "mattr": [f"-feature{child}x{n}"]}
        ids[n] = store.catalog.get_or_create_target(canonical, "llvm", "znver4-2c", {}).id
    results.put((child, ids[0]))
    engine.dispose()


def test_concurrent_creators_get_one_row_per_target_and_distinct_labels(store_url: str) -> None:
    """Four processes create the same target and two targets each of their own, all with the
    same label, at once (two API processes, or API and workers, on one store)."""
    engine = make_engine(store_url)
    upgrade_schema(engine)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(4), context.Queue()
    children = [
        context.Process(target=_create_in_child, args=(store_url, barrier, results, child))
        for child in range(4)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(120)
    assert [child.exitcode for child in children] == [0, 0, 0, 0]
    shared_ids = {results.get(timeout=5)[1] for _ in children}
    rows = Store(engine).catalog.list_targets()
    engine.dispose()
    assert len(shared_ids) == 1  # every process got the same row for the same target
    assert len(rows) == 1 + 4 * 2
    labels = [row.label for row in rows]
    assert len(set(labels)) == len(labels)
    assert labels.count("znver4-2c") == 1
    assert all(label.startswith("znver4-2c") for label in labels)
