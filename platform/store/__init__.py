"""LinkStream's hybrid store: persistent graphs + transient stream ring, VTS snapshots.

* :mod:`.protocol`   -- the ``Store`` / ``Snapshot`` protocols consumers code against;
* :mod:`.layout`     -- the on-disk store directory format (manifest + partitions);
* :mod:`.memory`     -- a small in-memory reference store;
* :mod:`.index`      -- immutable predicate-keyed CSR indexes of one graph (Wukong layout);
* :mod:`.persistent` -- indexed graphs + absorbed timeless batches, VTS snapshots, compaction;
* :mod:`.transient`  -- the per-stream ring of timestamped batches with its stream index;
* :mod:`.hybrid`     -- both behind one object (``HybridStore.open(DIR)``);
* :mod:`.loader`     -- pure-Python loading of RDF files into a store directory;
* :mod:`.deltalog`, :mod:`.indexcache`, :mod:`.storelock` -- the absorbed-batch log, cached
  indexes and the cross-process write lock of a store directory;
* :mod:`.static_results` -- stored results of static sub-joins (LMDB / HBase).

Layer: data only, above ``rdf``.  Queries over a store (one-shot SPARQL, graph exploration)
are :mod:`linkstream.engine.oneshot`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from linkstream.store.hybrid import HybridStore
    from linkstream.store.memory import MemoryStore
    from linkstream.store.persistent import PersistentSnapshot, PersistentStore
    from linkstream.store.protocol import DIRECTIONS, RDF_TYPE, AbsorbingStore, Snapshot, Store
    from linkstream.store.transient import TransientStore

#: where each re-exported name lives: imported on first use, so that a module which needs
#: one small part of the package (static results, layout) does not load the whole store
_HOMES = {
    "HybridStore": "hybrid",
    "MemoryStore": "memory",
    "PersistentSnapshot": "persistent",
    "PersistentStore": "persistent",
    "DIRECTIONS": "protocol",
    "RDF_TYPE": "protocol",
    "AbsorbingStore": "protocol",
    "Snapshot": "protocol",
    "Store": "protocol",
    "TransientStore": "transient",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


__all__ = [
    "DIRECTIONS",
    "RDF_TYPE",
    "AbsorbingStore",
    "HybridStore",
    "MemoryStore",
    "PersistentSnapshot",
    "PersistentStore",
    "Snapshot",
    "Store",
    "TransientStore",
]
