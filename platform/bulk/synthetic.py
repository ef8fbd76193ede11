"""Deterministic synthetic RDF graphs for bulk-load tests and benchmarks.

The generated graph looks like a sensor/knowledge graph at scale: entities with a
type, a label (language-tagged literal), an integer and a decimal value, links to
other entities and to a small set of places, some blank-node observations, and a
share of N-Quads statements in a few named graphs.  Every file also repeats some of
its own lines so that loaders must deduplicate.  Lines are built in vectorised
chunks: writing 5M triples takes a few seconds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

EX = "http://example.org/gen/"
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
XSD = "http://www.w3.org/2001/XMLSchema#"
_CHUNK = 200_000


@dataclass(frozen=True)
class SyntheticFiles:
    """What :func:`write_synthetic` wrote.

    Attributes:
        paths: the files (``.nt`` and ``.nq``), in order.
        lines: statement lines written (duplicates included).
    """

    paths: list[str]
    lines: int


def _statements(rng: np.random.Generator, first: int, n: int, entities: int) -> list[str]:
    """``n`` N-Triples statements of subjects ``first // 6 ...`` (six kinds round-robin)."""
    k = np.arange(first, first + n)
    subj = k // 6
    kind = k % 6
    other = rng.integers(0, entities, n)
    place = rng.integers(0, 1000, n)
    value = rng.integers(-50_000, 50_000, n)
    out = []
    for s, kd, ot, pl, v in zip(subj.tolist(), kind.tolist(), other.tolist(), place.tolist(), value.tolist()):
        subject = f"<{EX}e{s}>"
        if kd == 0:
            out.append(f"{subject} {RDF_TYPE} <{EX}Class{s % 23}> .")
        elif kd == 1:
            out.append(f'{subject} <{EX}label> "entity {s} label"@en .')
        elif kd == 2:
            out.append(f'{subject} <{EX}value> "{v}"^^<{XSD}integer> .')
        elif kd == 3:
            out.append(f"{subject} <{EX}linksTo> <{EX}e{ot}> .")
        elif kd == 4:
            out.append(f"{subject} <{EX}locatedIn> <{EX}place/{pl}> .")
        else:
            out.append(f"{subject} <{EX}observation> _:obs{s} .")
    return out


def write_synthetic(
    directory: str,
    triples: int,
    *,
    files: int = 4,
    quad_share: float = 0.1,
    duplicate_share: float = 0.01,
    seed: int = 0,
) -> SyntheticFiles:
    """Write about ``triples`` distinct statements as N-Triples files plus one N-Quads file.

    Args:
        directory: output folder (created if missing).
        triples: distinct statements to write in total.
        files: number of ``.nt`` files the triples are spread over.
        quad_share: fraction of the statements written as quads in ``gen.nq`` (4 named graphs).
        duplicate_share: fraction of each file's lines repeated at its end.
        seed: random seed (same arguments -> same bytes).

    Returns:
        The files written and the number of lines.
    """
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    n_quads = int(triples * quad_share)
    n_triples = triples - n_quads
    entities = max(1, triples // 6)
    paths: list[str] = []
    lines = 0
    bounds = np.linspace(0, n_triples, files + 1).astype(np.int64)
    for f in range(files):
        path = os.path.join(directory, f"gen-{f:03d}.nt")
        lines += _write_file(path, rng, int(bounds[f]), int(bounds[f + 1]), entities, duplicate_share, None)
        paths.append(path)
    if n_quads:
        path = os.path.join(directory, "gen.nq")
        lines += _write_file(path, rng, n_triples, triples, entities, duplicate_share, 4)
        paths.append(path)
    return SyntheticFiles(paths, lines)


def _write_file(
    path: str,
    rng: np.random.Generator,
    first: int,
    end: int,
    entities: int,
    duplicate_share: float,
    graphs: int | None,
) -> int:
    written = 0
    with open(path, "w", encoding="utf-8") as f:
        keep: list[str] = []
        for start in range(first, end, _CHUNK):
            stmts = _statements(rng, start, min(_CHUNK, end - start), entities)
            if graphs is not None:
                # "... ." -> "... <graph> ."; statement k goes to graph k % graphs
                stmts = [f"{st[:-2]} <{EX}graph/{(start + i) % graphs}> ." for i, st in enumerate(stmts)]
            f.write("\n".join(stmts))
            f.write("\n")
            written += len(stmts)
            n_dup = int(len(stmts) * duplicate_share)
            if n_dup:
                keep.extend(stmts[k] for k in rng.integers(0, len(stmts), n_dup).tolist())
        if keep:
            f.write("\n".join(keep))
            f.write("\n")
            written += len(keep)
    return written
