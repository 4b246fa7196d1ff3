"""The catalog aggregate (targets and workloads), on SQLite and on PostgreSQL."""

from __future__ import annotations

from schedules_db.store import Store
from schedules_db.values import Target, Workload

LOADED = {"interference": 0.6}  # cores' worth of other work (QUIET_CORES: 0.1)
LESS_LOADED = {"interference": 0.3}


def test_targets_and_workloads_are_created_once(store: Store) -> None:
    t1 = store.catalog.get_or_create_target({"kind": "llvm", "mcpu": "a"}, "llvm", "a", {})
    t2 = store.catalog.get_or_create_target({"mcpu": "a", "kind": "llvm"}, "llvm", "a", {})
    t3 = store.catalog.get_or_create_target({"kind": "llvm", "mcpu": "b"}, "llvm", "b", {})
    assert isinstance(t1, Target) and t1.id == t2.id != t3.id
    assert t1.canonical_json == '{"kind":"llvm","mcpu":"a"}'
    assert store.catalog.find_target(t1.key).id == t1.id
    assert store.catalog.find_target("b").id == t3.id  # by label
    assert store.catalog.find_target("nope") is None
    assert store.catalog.get_target(t3.id).label == "b"
    assert store.catalog.get_target(10**6) is None
    assert [t.id for t in store.catalog.list_targets()] == [t1.id, t3.id]  # oldest first

    w1 = store.catalog.get_or_create_workload("7", "{m}", "matmul", {"M": 2}, 1.0)
    assert isinstance(w1, Workload) and (w1.mod_json, w1.params, w1.origin) == (
        "{m}",
        {"M": 2},
        "catalog",
    )
    assert store.catalog.get_or_create_workload("7", "{}", "matmul", {}, 1.0).id == w1.id
    assert store.catalog.get_workload(w1.id).mod_json == "{m}"
    assert store.catalog.get_workload(10**6) is None
    assert store.catalog.find_workload("8") is None


def test_a_users_workload_is_keyed_apart_from_the_catalogs(store: Store) -> None:
    catalog = store.catalog.get_or_create_workload("42", "{catalog}", "matmul", {"M": 1}, 2.0)
    user = store.catalog.get_or_create_workload("42", "{user}", None, {}, 2.0)
    assert user.id != catalog.id and (catalog.origin, user.origin) == ("catalog", "user")
    assert store.catalog.get_or_create_workload("42", "{again}", None, {}, 2.0).id == user.id
    assert store.catalog.get_workload(catalog.id).mod_json == "{catalog}"  # never taken over
    assert store.catalog.find_workload("42").id == catalog.id


def test_workloads_list_newest_first_and_by_operator(store: Store) -> None:
    ids = [
        store.catalog.get_or_create_workload(str(n), "{}", op, {}, 1.0).id
        for n, op in enumerate(["matmul", "softmax", "matmul"])
    ]
    assert [w.id for w in store.catalog.list_workloads()] == ids[::-1]
    assert [w.id for w in store.catalog.list_workloads("matmul")] == [ids[2], ids[0]]
    assert [w.id for w in store.catalog.list_workloads(limit=1)] == [ids[2]]


def test_a_less_loaded_bandwidth_replaces_a_loaded_one_with_or_without_a_shared_cache(
    store: Store,
) -> None:
    target = store.catalog.get_or_create_target({"kind": "llvm", "mcpu": "z"}, "llvm", "z", {})
    assert (target.cache_gbps, target.llc_gbps, target.llc_bytes) == (None, None, None)
    store.catalog.set_bandwidth(target.id, 513.0, 48.0, 1 << 20, 240.0, 16 << 20, **LOADED)
    got = store.catalog.get_target(target.id)
    assert (got.cache_gbps, got.memory_gbps, got.cache_bytes) == (513.0, 48.0, 1 << 20)
    assert (got.llc_gbps, got.llc_bytes) == (240.0, 16 << 20)
    store.catalog.set_bandwidth(target.id, 200.0, 30.0, 2 << 20, **LESS_LOADED)  # no L3
    got = store.catalog.get_target(target.id)
    assert (got.cache_gbps, got.memory_gbps, got.llc_gbps, got.llc_bytes) == (200, 30, None, None)


def test_the_best_quiet_figure_is_kept_and_a_loaded_one_never_replaces_it(store: Store) -> None:
    """Issue 38: a worker started beside other work measured 377 GFLOPS where the machine
    reaches 451; kept, that figure made an 84% kernel look 100% and stopped its search."""
    target = store.catalog.get_or_create_target({"kind": "llvm", "mcpu": "q"}, "llvm", "q", {})

    def peak(gflops: float, interference: float | None) -> tuple[bool, float | None, float | None]:
        changed = store.catalog.set_peak(target.id, gflops, interference=interference)
        got = store.catalog.get_target(target.id)
        return changed, got.peak_gflops, got.peak_interference

    assert peak(377.0, 0.45) == (True, 377.0, 0.45)  # under load, but the only one
    assert peak(300.0, 0.7) == (False, 377.0, 0.45)  # under more load: dropped
    assert peak(390.0, None) == (False, 377.0, 0.45)  # load unknown: no better than known
    assert peak(410.0, 0.2) == (True, 410.0, 0.2)  # under less load
    assert not store.catalog.get_target(target.id).peak_trusted
    assert peak(440.0, 0.02) == (True, 440.0, 0.02)  # quiet: trusted from now on
    assert store.catalog.get_target(target.id).peak_trusted
    assert peak(451.0, 0.01) == (True, 451.0, 0.01)  # a better quiet one
    assert peak(430.0, 0.0) == (False, 451.0, 0.01)  # a worse quiet one: the best stays
    assert peak(900.0, 0.5) == (False, 451.0, 0.01)  # anything under load, even higher

    assert store.catalog.set_bandwidth(target.id, 400.0, 20.0, 1 << 20, 90.0, 8 << 20,
                                       interference=0.0)  # fmt: skip
    assert store.catalog.set_bandwidth(target.id, 380.0, 25.0, 1 << 20, 95.0, 8 << 20,
                                       interference=0.05)  # fmt: skip
    got = store.catalog.get_target(target.id)  # each level's best of the quiet ones
    assert (got.cache_gbps, got.memory_gbps, got.llc_gbps) == (400.0, 25.0, 95.0)
    assert got.bandwidth_trusted
    assert not store.catalog.set_bandwidth(target.id, 300.0, 20.0, 1 << 20, 90.0, 8 << 20,
                                           interference=0.0)  # fmt: skip  # no better: no change
    assert not store.catalog.set_bandwidth(target.id, 900.0, 90.0, 1 << 20,
                                           interference=0.4)  # fmt: skip
    assert store.catalog.get_target(target.id).cache_gbps == 400.0
    assert not store.catalog.set_peak(10**6, 1.0, interference=0.0)


def test_the_bf16_peak_is_kept_as_the_fp32_one_and_apart_from_it(store: Store) -> None:
    """Issue 39: the bf16 unit's peak, kept by the same rule; it never changes the fp32 peak."""
    target = store.catalog.get_or_create_target({"kind": "llvm", "mcpu": "b"}, "llvm", "b", {})
    assert (target.bf16_unit, target.bf16_peak_gflops) == (None, None)
    store.catalog.set_peak(target.id, 230.0, interference=0.0)

    def bf16(unit: str, gflops: float, interference: float | None) -> tuple:
        changed = store.catalog.set_bf16_peak(target.id, unit, gflops, interference=interference)
        got = store.catalog.get_target(target.id)
        return changed, got.bf16_unit, got.bf16_peak_gflops, got.bf16_peak_trusted

    assert bf16("avx512_bf16", 300.0, 0.6) == (True, "avx512_bf16", 300.0, False)
    assert bf16("avx512_bf16", 250.0, 0.9) == (False, "avx512_bf16", 300.0, False)
    assert bf16("avx512_bf16", 450.0, 0.0) == (True, "avx512_bf16", 450.0, True)
    assert bf16("avx512_bf16", 440.0, 0.01) == (False, "avx512_bf16", 450.0, True)
    assert bf16("avx512_bf16", 900.0, 0.5) == (False, "avx512_bf16", 450.0, True)
    # Another unit (the machine behind the target changed): its figure, whatever it was.
    assert bf16("amx", 6000.0, 0.3) == (True, "amx", 6000.0, False)
    assert store.catalog.get_target(target.id).peak_gflops == 230.0
    assert not store.catalog.set_bf16_peak(10**6, "amx", 1.0, interference=0.0)
