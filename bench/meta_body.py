#!/usr/bin/env python3
"""What ``--ingest meta`` takes off the leader per body: the hand-off's decoding and the
worker's encoding of the terms, against the meta body's decoding (CPU time, one process).

A body of ``--elements`` elements of ``--triples`` triples each, shaped as CityBench's
traffic observations (a subject per element, shared predicates, a few literal values):

* ``full`` (``--ingest owners``): the leader unpacks the hand-off (msgpack, the terms as
  strings), checks it (``unpack_elements``), and its worker encodes the body's terms in the
  dictionary once and each element's triples (``table[idx]``, ``dedup_triples``);
* ``meta``: the leader unpacks the meta body and builds the ``RefRows`` (``meta_elements``).

Both then pay the same per-element costs not measured here (``push_many``'s decision, the
reference record, the worker's bookkeeping, the fan-out row), and ``meta`` pays the
``full`` encoding later for the elements a backlog or a checkpoint reads back.

    python bench/meta_body.py [--elements 100] [--triples 19] [--bodies 300]
"""

from __future__ import annotations

import argparse
import json
import time

import msgpack
import numpy as np

from linkstream.cluster.ingestwire import (
    META_FIELDS,
    meta_elements,
    pack_elements,
    unpack_elements,
    with_refs,
)
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.rdf.static import dedup_triples

EX = "http://www.insight-centre.org/dataset/SampleEventService#"


def body(k: int, elements: int, triples: int) -> list[tuple[int, list[tuple[str, str, str]]]]:
    out = []
    for e in range(elements):
        s = f"<{EX}obs{k}-{e}>"
        rows = [
            (s, f"<{EX}p{i}>", f'"{(k * elements + e + i) % 97}"^^<http://www.w3.org/2001/XMLSchema#int>')
            for i in range(triples)
        ]
        out.append((1000 * (k * elements + e), rows))
    return out


def hand_off(k: int, elements: int, triples: int) -> tuple[bytes, bytes]:
    doc = {"stream": EX + "s", "owner": "o", "epoch": 7, "offset": k * elements, "key": None, "record": k}
    doc.update(pack_elements(body(k, elements, triples)))
    return msgpack.packb(doc, use_bin_type=True), msgpack.packb(
        {f: doc[f] for f in META_FIELDS}, use_bin_type=True
    )


def full(packed: bytes, dictionary: MemoryDictionary) -> int:
    doc = msgpack.unpackb(packed, raw=False)
    els = with_refs(unpack_elements(doc), int(doc["epoch"]), int(doc["record"]))
    table = np.asarray(dictionary.encode_many(list(els[0][1].terms)), dtype=np.int64)
    n = 0
    for _, rows in els:
        n += len(dedup_triples(table[rows.idx]))
    return n


def meta(packed: bytes) -> int:
    doc = msgpack.unpackb(packed, raw=False)
    return sum(len(rows) for _, rows in meta_elements(doc))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--elements", type=int, default=100)
    ap.add_argument("--triples", type=int, default=19)
    ap.add_argument("--bodies", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of both")
    args = ap.parse_args()
    bodies = [hand_off(k, args.elements, args.triples) for k in range(args.bodies)]
    ktr = args.bodies * args.elements * args.triples / 1000
    out: dict[str, list[float]] = {"full": [], "meta": []}
    for _ in range(args.rounds):
        dictionary = MemoryDictionary()
        t0 = time.process_time()
        for packed, _ in bodies:
            full(packed, dictionary)
        out["full"].append((time.process_time() - t0) * 1000 / ktr)
        t0 = time.process_time()
        for _, packed in bodies:
            meta(packed)
        out["meta"].append((time.process_time() - t0) * 1000 / ktr)
    sizes = {
        "full": sum(len(f) for f, _ in bodies) / args.bodies,
        "meta": sum(len(m) for _, m in bodies) / args.bodies,
    }
    for name in ("full", "meta"):
        ms = ", ".join(f"{x:.3f}" for x in out[name])
        print(f"{name}: CPU ms per 1,000 triples {ms}; hand-off {sizes[name]:.0f} bytes per body")
    print(json.dumps({"args": vars(args), "cpu_ms_per_ktr": out, "bytes_per_body": sizes}))


if __name__ == "__main__":
    main()
