"""Two real processes absorbing into one store directory (the directory's ``flock``).

Each child process opens the same store directory, absorbs its own stream's batches and
checkpoints now and then, concurrently with the other.  Afterwards the directory reopens
holding every batch exactly once: all triples, the VTS of both streams, no record twice
in the write-ahead log.  Without the lock a checkpoint empties the log of batches its
process never saw, and appends of the two processes interleave.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.store import PersistentStore, layout
from linkstream.store.deltalog import DeltaLog
from linkstream.store.storelock import StoreLock, StoreLockedError

BASE = np.array([[1, 2, 3], [1, 2, 4], [5, 6, 1]], dtype=np.int64)
WIDTH = 40  # triples per batch: records of ~1 KB, so unlocked appends would interleave

#: a child: absorb ``n`` batches of stream ``name`` (checkpoint every ``every``), print a summary
WRITER = r"""
import json, sys, time
from pathlib import Path
import numpy as np
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.store import PersistentStore

store_dir, name, first, n, every, width, go = sys.argv[1:8]
first, n, every, width = int(first), int(n), int(every), int(width)
store = PersistentStore.open(store_dir, dictionary=MemoryDictionary(), background_compaction=False,
                             compact_threshold=64, lock_timeout=60)
while not Path(go).exists():
    time.sleep(0.005)
for k in range(1, n + 1):
    s = first + k
    t = np.stack([np.full(width, s), np.full(width, 2), 1000 + np.arange(width)], axis=1)
    store.absorb(name, k, t)
    if k % every == 0:
        store.checkpoint()
store.refresh()
snap = store.snapshot()
print(json.dumps({"vts": dict(zip(snap.streams, snap.vts)), "waited": store._flock.waited}))
store.close()
"""

#: a child: hold the directory's lock until its stdin closes
HOLDER = r"""
import sys
from linkstream.store.storelock import StoreLock
lock = StoreLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
sys.stdin.read()
lock.release()
"""


def _batch(first: int, k: int) -> np.ndarray:
    s = first + k
    return np.stack([np.full(WIDTH, s), np.full(WIDTH, 2), 1000 + np.arange(WIDTH)], axis=1)


def _rows(a: np.ndarray) -> set[tuple[int, int, int]]:
    return {tuple(int(x) for x in r) for r in np.asarray(a).reshape(-1, 3)}


def _new_store_dir(path: Path) -> Path:
    e = layout.write_partitions(path, None, BASE, 2)
    layout.write_manifest(path, dictionary="memory:", partitions=2, graphs=[e])
    return path


def _python(code: str, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *args], text=True, **kw)


@pytest.mark.parametrize("every", [7, 1000], ids=["with-checkpoints", "log-only"])
def test_two_processes_absorb_concurrently_and_every_batch_is_kept_once(tmp_path: Path, every: int) -> None:
    d = _new_store_dir(tmp_path / "st")
    go = tmp_path / "go"
    n = 60
    writers = {"w0": 10_000, "w1": 20_000}
    procs = {
        name: _python(
            WRITER, str(d), name, str(first), str(n), str(every), str(WIDTH), str(go), stdout=subprocess.PIPE
        )
        for name, first in writers.items()
    }
    time.sleep(0.2)
    go.touch()  # both start absorbing together
    outs = {name: p.communicate(timeout=120) for name, p in procs.items()}
    for name, p in procs.items():
        assert p.returncode == 0, outs[name]
    summaries = {name: json.loads(outs[name][0]) for name in procs}
    for name, s in summaries.items():
        assert s["vts"][name] == n  # each process's own view has all its batches

    expect = _rows(BASE)
    for first in writers.values():
        for k in range(1, n + 1):
            expect |= _rows(_batch(first, k))
    store = PersistentStore.open(d, dictionary=MemoryDictionary(), background_compaction=False)
    snap = store.snapshot()
    got = snap.triples(None)
    assert len(got) == len(expect) and _rows(got) == expect
    assert dict(zip(snap.streams, snap.vts)) == {"w0": n, "w1": n}
    logged = [(b.stream, b.ts) for b in DeltaLog(d / "delta" / "log.bin").replay()]
    assert len(logged) == len(set(logged)), "a batch logged twice"
    m = layout.read_manifest(d)
    ck = m.extra.get("vts", {})
    # every batch is in the partitions (up to the checkpointed VTS) or in the log, once
    for name in writers:
        in_log = sorted(ts for s, ts in logged if s == name)
        assert in_log == list(range(ck.get(name, 0) + 1, n + 1)) or (
            in_log and in_log[0] == ck.get(name, 0) and in_log[1:] == list(range(ck[name] + 1, n + 1))
        ), (name, ck, in_log)
    if every < n:
        assert ck, "no checkpoint reached the manifest"
    store.close()


def test_a_held_lock_gives_a_clear_error_or_is_waited_for(tmp_path: Path) -> None:
    d = _new_store_dir(tmp_path / "st")
    store = PersistentStore.open(
        d, dictionary=MemoryDictionary(), background_compaction=False, lock_timeout=0.3
    )
    holder = _python(HOLDER, str(d), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        with pytest.raises(StoreLockedError) as e:
            store.absorb("a", 1, np.array([[7, 2, 3]]))
        assert 0.25 < time.monotonic() - t0 < 5
        assert f"locked by another process (pid {holder.pid})" in str(e.value)
        assert store.snapshot().vts == ()  # nothing half-applied
        with pytest.raises(StoreLockedError):
            PersistentStore.open(d, dictionary=MemoryDictionary(), lock_timeout=0)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()  # the holder releases
        holder.wait(timeout=30)
    store.absorb("a", 1, np.array([[7, 2, 3]]))
    assert store.snapshot().vts == (1,)
    store.close()

    # wait-with-timeout: a holder that lets go within the timeout is waited for
    store = PersistentStore(MemoryDictionary(), store_dir=d, background_compaction=False, lock_timeout=30)
    holder = _python(HOLDER, str(d), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    release = threading.Timer(0.3, holder.stdin.close)  # type: ignore[union-attr]
    release.start()
    t0 = time.monotonic()
    store.absorb("a", 2, np.array([[8, 2, 3]]))
    assert time.monotonic() - t0 >= 0.25 and store._flock is not None and store._flock.waited >= 0.25
    assert store.snapshot().vts == (2,)
    holder.wait(timeout=30)
    store.close()


def test_store_lock_is_reentrant_and_exclusive_between_objects(tmp_path: Path) -> None:
    a, b = StoreLock(tmp_path, timeout=0), StoreLock(tmp_path, timeout=0)
    with a:
        with a:
            assert a.held
        assert a.held
        with pytest.raises(StoreLockedError):
            b.acquire()
    assert not a.held
    with b:
        assert b.held
    with pytest.raises(RuntimeError):
        a.release()


def test_a_checkpoint_that_catches_up_past_the_compaction_threshold_finishes(tmp_path: Path) -> None:
    """A checkpoint applies the batches another writer logged meanwhile (``_catch_up``);
    when they take a graph's delta past the compaction threshold, the compaction that
    triggers runs inside the checkpoint's own compaction lock. It must not wait for that
    lock: before the fix the checkpoint hung there, holding the directory's lock, and every
    other writer gave up after its lock timeout."""
    d = _new_store_dir(tmp_path / "st")
    kw = {"dictionary": MemoryDictionary(), "background_compaction": False, "compact_threshold": 64}
    mine = PersistentStore.open(d, lock_timeout=5, **kw)
    other = PersistentStore.open(d, lock_timeout=5, **kw)
    for k in range(1, 4):  # 3 x 40 rows logged by the other writer, unseen by mine
        other.absorb("w1", k, _batch(20_000, k))
    mine.absorb("w0", 1, _batch(10_000, 1))  # (catches up too; leaves no compaction pending)
    for k in range(4, 8):
        other.absorb("w1", k, _batch(20_000, k))
    done = threading.Event()
    errors: list[BaseException] = []

    def checkpoint() -> None:
        try:
            mine.checkpoint()
        except BaseException as e:  # (reported below)
            errors.append(e)
        done.set()

    threading.Thread(target=checkpoint, daemon=True).start()
    assert done.wait(10), "the checkpoint hung (a compaction waited for the lock its checkpoint holds)"
    assert not errors, errors
    expect = _rows(BASE) | _rows(_batch(10_000, 1))
    for k in range(1, 8):
        expect |= _rows(_batch(20_000, k))
    assert _rows(mine.snapshot().triples(None)) == expect
    other.close()
    mine.close()
