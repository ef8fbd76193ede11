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
* :mod:`.literals`   -- literal keys one-shot queries compare by;
* :mod:`.static_results` -- stored results of static sub-joins (LMDB / HBase).

Layer: data only, above ``rdf``.  Queries over a store (one-shot SPARQL, graph exploration)
are :mod:`linkstream.engine.oneshot`.
"""

from __future__ import annotations

from linkstream.store.hybrid import HybridStore
from linkstream.store.memory import MemoryStore
from linkstream.store.persistent import PersistentSnapshot, PersistentStore
from linkstream.store.protocol import DIRECTIONS, RDF_TYPE, AbsorbingStore, Snapshot, Store
from linkstream.store.transient import TransientStore

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
