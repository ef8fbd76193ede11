"""The files a bulk load reads, numbered as the pure-Python loader numbers them.

Inputs are expanded by :func:`linkstream.store.loader.expand_inputs` (files as given,
folders walked recursively in sorted order) and the ``k``-th file gets the blank-node
prefix ``s{k}_``, the rule of the pure-Python loader: blank nodes of different files
never merge, and the Spark and pure-Python loads of the same inputs give the same terms.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from linkstream.store.loader import expand_inputs as _expand

#: suffixes of the line-based formats the Spark loader reads
LINE_SUFFIXES = (".nt", ".ntriples", ".nq", ".nquads")


@dataclass(frozen=True)
class InputFile:
    """One file to load.

    Attributes:
        path: absolute path.
        bnode_prefix: prepended to its blank-node labels.
        size: bytes.
    """

    path: str
    bnode_prefix: str
    size: int


def bnode_prefix(index: int) -> str:
    """Blank-node prefix of the ``index``-th input file (as the pure-Python loader gives it)."""
    return f"s{index}_"


def expand_inputs(inputs: Sequence[str]) -> list[InputFile]:
    """The N-Triples / N-Quads files named by ``inputs`` (files, or folders walked in sorted order).

    Raises:
        FileNotFoundError: an input does not exist.
        ValueError: no input or no file found, a file in another format, or a file named twice.
    """
    if not inputs:
        raise ValueError("nothing to load: give N-Triples / N-Quads files or folders")
    paths = _expand(list(inputs))
    if not paths:
        raise ValueError(f"no RDF files found in {', '.join(inputs)}")
    out = []
    seen: set[str] = set()
    for k, p in enumerate(paths):
        if not p.lower().endswith(LINE_SUFFIXES):
            raise ValueError(
                f"{p}: the Spark loader reads N-Triples / N-Quads only ({', '.join(LINE_SUFFIXES)}); "
                "load other formats without --spark"
            )
        a = os.path.abspath(p)
        if a in seen:
            raise ValueError(f"{p}: named twice in the inputs")
        seen.add(a)
        out.append(InputFile(a, bnode_prefix(k), os.path.getsize(a)))
    return out
