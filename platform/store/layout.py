"""Reading and writing LinkStream store directories.

A store directory (written by ``linkstream load``, pure-Python or Spark)::

    DIR/store.json      manifest: {"format": "linkstream-store", "version": 1, "dictionary": URI,
                        "partitions": P, "graphs": [{"iri": null | IRI, "dir": "g0", "triples": n}],
                        "sources": [...], "loader": "python" | "spark"}
    DIR/dict/           LMDB dictionary (the usual ``"dictionary": "lmdb:dict"``, relative to DIR)
    DIR/graphs/<gdir>/part-00000.npy ... part-{P-1:05d}.npy
                        (n, 3) int64 C-order (s, p, o) ids, deduplicated within the graph;
                        a triple lives in partition ``s % P``; row order unspecified
    DIR/index/...       index caches the persistent store builds on first open

The manifest also records ``"files"``: ``{relpath: {"size": n, "crc32": "8 hex"}}`` for every
partition file, and ``{"min_size": n}`` for an ``lmdb:`` dictionary's ``data.mdb`` (it grows
as terms are added, so only truncation is detectable).  :func:`write_manifest` computes them
from the files on disk right before publishing the manifest (tmp file, fsync, rename), so
every writer records them.  :func:`check_files` (cheap: sizes only; run on every open) and
:func:`verify_files` (recomputes checksums; ``linkstream store verify``) raise / report
:class:`StoreError`.  Stores written before this have no ``"files"``: nothing is checked.

Graph IRIs are stored without angle brackets; ``None`` is the default graph.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from linkstream.rdf.dictionary import Dictionary, open_dictionary

FORMAT = "linkstream-store"
VERSION = 1
MANIFEST = "store.json"
GRAPHS = "graphs"
INDEX = "index"
DEFAULT_DICTIONARY = "lmdb:dict"


FILES = "files"
LMDB_DATA = "data.mdb"


class StoreError(ValueError):
    """A store directory is damaged: a file its manifest names is missing, truncated or altered."""


@dataclass(frozen=True)
class GraphEntry:
    """One graph of a store directory.

    Attributes:
        iri: the graph's IRI (no angle brackets), ``None`` for the default graph.
        dir: its folder under ``DIR/graphs/``.
        triples: number of (distinct) triples over all its partitions.
    """

    iri: str | None
    dir: str
    triples: int

    def to_json(self) -> dict[str, object]:
        return {"iri": self.iri, "dir": self.dir, "triples": int(self.triples)}


@dataclass(frozen=True)
class Manifest:
    """The parsed ``store.json`` of a store directory."""

    dictionary: str
    partitions: int
    graphs: tuple[GraphEntry, ...]
    sources: tuple[str, ...] = ()
    loader: str = "python"
    extra: dict[str, object] = field(default_factory=dict)

    def graph(self, iri: str | None) -> GraphEntry | None:
        """The entry of graph ``iri`` (``None`` = default graph), or ``None`` if absent."""
        for g in self.graphs:
            if g.iri == iri:
                return g
        return None

    @property
    def total_triples(self) -> int:
        return sum(g.triples for g in self.graphs)


def tmp_suffix() -> str:
    """A temporary-file suffix unique to this process and thread (concurrent writers of
    one store directory never share a temporary file; ``os.replace`` then publishes)."""
    return f".tmp-{os.getpid()}-{threading.get_ident()}"


def partition_of(subjects: np.ndarray, partitions: int) -> np.ndarray:
    """Partition number of each subject id (``s % P``)."""
    return np.asarray(subjects, dtype=np.int64) % int(partitions)


def partition_path(store_dir: str | os.PathLike[str], gdir: str, k: int) -> Path:
    """Path of partition ``k`` of graph folder ``gdir``."""
    return Path(store_dir) / GRAPHS / gdir / f"part-{k:05d}.npy"


def _pack_bits(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[int, int] | None:
    """Bit widths of ``b`` and ``c`` if ``(a, b, c)`` packs into one non-negative int64."""
    if not len(a) or min(int(x.min()) for x in (a, b, c)) < 0:
        return None
    bits = [int(x.max()).bit_length() for x in (a, b, c)]
    return (bits[1], bits[2]) if sum(bits) <= 63 else None


def sorted_columns(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, *, distinct: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Columns ``(a, b, c)`` with rows sorted lexicographically (repeats removed if ``distinct``).

    Packs the three columns into one int64 key when their bit widths add up to at most
    63 (typical for dictionary ids): sorting one key and unpacking it is many times
    faster than ``np.lexsort`` plus gathers.  Returns three contiguous int64 arrays.
    """
    a, b, c = (np.asarray(x, dtype=np.int64) for x in (a, b, c))
    bits = _pack_bits(a, b, c)
    if bits is not None:
        bb, bc = bits
        key = (a << (bb + bc)) | (b << bc) | c
        key.sort()
        if distinct and len(key) > 1:
            keep = np.empty(len(key), dtype=bool)
            keep[0] = True
            np.not_equal(key[1:], key[:-1], out=keep[1:])
            key = key[keep]
        return key >> (bb + bc), (key >> bc) & ((1 << bb) - 1), key & ((1 << bc) - 1)
    n = len(a)
    if n < 2:
        return a.copy(), b.copy(), c.copy()
    order = np.lexsort((c, b, a))
    a, b, c = a[order], b[order], c[order]
    if distinct:
        keep = np.empty(n, dtype=bool)
        keep[0] = True
        keep[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1]) | (c[1:] != c[:-1])
        a, b, c = a[keep], b[keep], c[keep]
    return a, b, c


def order2(major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """Permutation sorting by ``(major, minor)`` (non-negative int64 columns), packed when possible."""
    if not len(major):
        return np.empty(0, dtype=np.int64)
    bm = int(minor.max()).bit_length()
    if min(int(major.min()), int(minor.min())) >= 0 and int(major.max()).bit_length() + bm <= 63:
        return np.argsort((major << bm) | minor, kind="stable")
    return np.lexsort((minor, major))


def unique_rows(triples: np.ndarray) -> np.ndarray:
    """Distinct rows of an ``(n, 3)`` int64 array, sorted by (s, p, o)."""
    t = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
    cols = sorted_columns(t[:, 0], t[:, 1], t[:, 2], distinct=True)
    out = np.empty((len(cols[0]), 3), dtype=np.int64)
    for i, col in enumerate(cols):
        out[:, i] = col
    return out


def next_graph_dir(store_dir: str | os.PathLike[str]) -> str:
    """A graph folder name (``g0``, ``g1`` ...) not yet used under ``DIR/graphs``."""
    root = Path(store_dir) / GRAPHS
    k = 0
    while (root / f"g{k}").exists():
        k += 1
    return f"g{k}"


def write_partition(
    store_dir: str | os.PathLike[str], gdir: str, k: int, triples: np.ndarray, *, dedup: bool = True
) -> int:
    """Write one partition file (atomically); returns its number of rows.

    Args:
        store_dir: the store directory.
        gdir: the graph folder.
        k: partition number; every row must satisfy ``s % P == k`` (not checked here).
        triples: ``(n, 3)`` int64 rows.
        dedup: remove repeated rows first (pass ``False`` if they are already distinct).
    """
    rows = unique_rows(triples) if dedup else np.ascontiguousarray(triples, dtype=np.int64).reshape(-1, 3)
    path = partition_path(store_dir, gdir, k)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + tmp_suffix() + ".npy")
    np.save(tmp, rows)
    os.replace(tmp, path)
    return len(rows)


class GraphWriter:
    """Writes one graph's partitions from chunks of triples, deduplicating per partition.

    Chunks are spilled to per-partition temporary files, so a graph larger than memory
    is deduplicated one partition at a time (each partition must fit in memory).

    Args:
        store_dir: the store directory (created if missing).
        graph_iri: the graph's IRI without angle brackets, ``None`` for the default graph.
        partitions: number of subject-hash partitions ``P``.
        gdir: the graph folder (default: the next free ``gN``).
    """

    def __init__(
        self,
        store_dir: str | os.PathLike[str],
        graph_iri: str | None,
        partitions: int,
        *,
        gdir: str | None = None,
    ) -> None:
        if partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {partitions}")
        self.store_dir = store_dir
        self.graph_iri = graph_iri
        self.partitions = partitions
        self.gdir = gdir or next_graph_dir(store_dir)
        root = Path(store_dir) / GRAPHS / self.gdir
        root.mkdir(parents=True, exist_ok=True)
        self._spill = tempfile.TemporaryDirectory(dir=root, prefix=".spill-")
        self._files = [
            open(os.path.join(self._spill.name, f"{k}.bin"), "wb")  # noqa: SIM115
            for k in range(partitions)
        ]
        self.rows_in = 0

    def add(self, chunk: np.ndarray) -> None:
        """Add an ``(n, 3)`` int64 chunk (repeats allowed)."""
        c = np.ascontiguousarray(chunk, dtype=np.int64).reshape(-1, 3)
        if not len(c):
            return
        self.rows_in += len(c)
        if self.partitions == 1:
            self._files[0].write(c.tobytes())
            return
        part = partition_of(c[:, 0], self.partitions)
        order = np.argsort(part, kind="stable")
        bounds = np.searchsorted(part[order], np.arange(self.partitions + 1))
        c = c[order]
        for k in range(self.partitions):
            if bounds[k + 1] > bounds[k]:
                self._files[k].write(c[bounds[k] : bounds[k + 1]].tobytes())

    def finish(self) -> GraphEntry:
        """Deduplicate and write every partition; returns the graph's manifest entry."""
        for f in self._files:
            f.close()
        total = 0
        try:
            for k in range(self.partitions):
                raw = np.fromfile(os.path.join(self._spill.name, f"{k}.bin"), dtype=np.int64).reshape(-1, 3)
                total += write_partition(self.store_dir, self.gdir, k, raw)
        finally:
            self._spill.cleanup()
        return GraphEntry(self.graph_iri, self.gdir, total)

    def abort(self) -> None:
        """Drop the spilled rows without writing anything."""
        for f in self._files:
            f.close()
        self._spill.cleanup()


def write_partitions(
    store_dir: str | os.PathLike[str],
    graph_iri: str | None,
    triples: np.ndarray | Iterable[np.ndarray],
    partitions: int,
    *,
    gdir: str | None = None,
) -> GraphEntry:
    """Write all partitions of one graph, deduplicated, and return its manifest entry.

    Args:
        store_dir: the store directory (created if missing).
        graph_iri: the graph's IRI without angle brackets, ``None`` for the default graph.
        triples: one ``(n, 3)`` int64 array or an iterable of such chunks (repeats allowed;
            spilled to disk, so the graph may be larger than memory).
        partitions: number of subject-hash partitions ``P``.
        gdir: the graph folder (default: the next free ``gN``).
    """
    w = GraphWriter(store_dir, graph_iri, partitions, gdir=gdir)
    try:
        for chunk in [triples] if isinstance(triples, np.ndarray) else triples:
            w.add(chunk)
    except BaseException:
        w.abort()
        raise
    return w.finish()


def write_manifest(
    store_dir: str | os.PathLike[str],
    *,
    dictionary: str,
    partitions: int,
    graphs: Sequence[GraphEntry | dict[str, object]],
    sources: Sequence[str] = (),
    loader: str = "python",
    **extra: object,
) -> Path:
    """Write ``DIR/store.json`` atomically (default graph first) and return its path.

    Args:
        store_dir: the store directory.
        dictionary: dictionary URI; a relative ``lmdb:`` path is relative to the directory.
        partitions: number of partitions per graph.
        graphs: entries (``GraphEntry`` or their JSON dicts).
        sources: the loaded files.
        loader: ``"python"`` or ``"spark"``.
        **extra: further JSON-serialisable keys to record.
    """
    entries = [g if isinstance(g, GraphEntry) else _entry(g) for g in graphs]
    entries.sort(key=lambda g: (g.iri is not None, g.iri or ""))
    extra.pop(FILES, None)  # always recomputed from the files on disk
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "dictionary": dictionary,
        "partitions": int(partitions),
        "graphs": [g.to_json() for g in entries],
        "sources": [str(s) for s in sources],
        "loader": loader,
        **extra,
        FILES: _file_records(store_dir, dictionary, int(partitions), entries),
    }
    path = Path(store_dir) / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(MANIFEST + tmp_suffix())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(doc, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return path


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def file_crc32(path: str | os.PathLike[str]) -> str:
    """CRC-32 of a file's bytes as 8 hex digits."""
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return f"{crc & 0xFFFFFFFF:08x}"


def _lmdb_data_relpath(store_dir: str | os.PathLike[str], dictionary: str) -> str | None:
    """``data.mdb`` of an ``lmdb:`` dictionary inside the store directory, relative to it."""
    scheme, _, rest = dictionary.partition(":")
    if scheme.lower() != "lmdb":
        return None
    rel = rest[2:] if rest.startswith("//") else rest
    if not rel or os.path.isabs(rel):
        return None
    return (Path(rel) / LMDB_DATA).as_posix()


def _file_records(
    store_dir: str | os.PathLike[str], dictionary: str, partitions: int, entries: Sequence[GraphEntry]
) -> dict[str, dict[str, object]]:
    root = Path(store_dir)
    out: dict[str, dict[str, object]] = {}
    for g in entries:
        for k in range(partitions):
            p = partition_path(store_dir, g.dir, k)
            if p.exists():
                out[p.relative_to(root).as_posix()] = {"size": p.stat().st_size, "crc32": file_crc32(p)}
    rel = _lmdb_data_relpath(store_dir, dictionary)
    if rel is not None and (root / rel).exists():
        out[rel] = {"min_size": (root / rel).stat().st_size}
    return out


def _records(m: Manifest) -> dict[str, dict[str, object]]:
    files = m.extra.get(FILES)
    if not isinstance(files, dict):
        return {}
    return {str(k): v for k, v in files.items() if isinstance(v, dict)}


def _size_problem(store_dir: str | os.PathLike[str], rel: str, rec: dict[str, object]) -> str | None:
    path = Path(store_dir) / rel
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return f"{path}: missing"
    except OSError as e:
        return f"{path}: unreadable ({e.strerror or e})"
    want = rec.get("size")
    if want is not None and size != int(want):  # type: ignore[call-overload]  # JSON int
        return f"{path}: size {size} bytes, expected {int(want)}"  # type: ignore[call-overload]  # JSON int
    low = rec.get("min_size")
    if low is not None and size < int(low):  # type: ignore[call-overload]  # JSON int
        return f"{path}: size {size} bytes, expected at least {int(low)} (truncated)"  # type: ignore[call-overload]  # JSON int
    return None


def check_files(store_dir: str | os.PathLike[str], manifest: Manifest | None = None) -> None:
    """Cheap integrity check (one ``stat`` per file) of the files the manifest records.

    Raises:
        StoreError: naming every missing file and every file of the wrong size.
    """
    m = manifest or read_manifest(store_dir)
    bad = [p for rel, rec in sorted(_records(m).items()) if (p := _size_problem(store_dir, rel, rec))]
    if bad:
        raise StoreError(f"damaged store {store_dir}: " + "; ".join(bad))


def verify_files(
    store_dir: str | os.PathLike[str], manifest: Manifest | None = None
) -> tuple[int, list[str]]:
    """Full integrity check: sizes and recomputed checksums of every recorded file.

    Returns:
        (number of files checked, one message per damaged file).  Files recorded without a
        checksum (or stores without records) only get the size check / none.
    """
    m = manifest or read_manifest(store_dir)
    recs = _records(m)
    bad: list[str] = []
    for rel, rec in sorted(recs.items()):
        problem = _size_problem(store_dir, rel, rec)
        if problem is None and rec.get("crc32") is not None:
            try:
                got = file_crc32(Path(store_dir) / rel)
            except OSError as e:
                problem = f"{Path(store_dir) / rel}: unreadable ({e.strerror or e})"
            else:
                if got != str(rec["crc32"]):
                    problem = f"{Path(store_dir) / rel}: checksum crc32 {got}, expected {rec['crc32']}"
        if problem is not None:
            bad.append(problem)
    if not bad:  # the partitions are readable: their rows must add up to each graph's count
        bad.extend(_count_problems(store_dir, m))
    return len(recs), bad


def _count_problems(store_dir: str | os.PathLike[str], m: Manifest) -> list[str]:
    """One message per graph whose recorded ``triples`` differs from its partitions' rows."""
    out = []
    for g in m.graphs:
        try:
            rows = sum(len(a) for a in iter_partitions(store_dir, g, mmap=True, manifest=m))
        except (OSError, ValueError) as e:
            out.append(" ".join(str(e).split()))
            continue
        if rows != g.triples:
            name = "the default graph" if g.iri is None else f"graph <{g.iri}>"
            out.append(
                f"{Path(store_dir) / MANIFEST}: {name} records {g.triples} triples, "
                f"its partitions ({GRAPHS}/{g.dir}) hold {rows}"
            )
    return out


def read_manifest(store_dir: str | os.PathLike[str]) -> Manifest:
    """Parse ``DIR/store.json``.

    Raises:
        FileNotFoundError: no manifest in the directory.
        ValueError: not a LinkStream store manifest, or an unsupported version.
    """
    path = Path(store_dir) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"not a LinkStream store (no {MANIFEST}): {store_dir}")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: invalid JSON: {e}") from e
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    except OSError as e:
        raise ValueError(f"{path}: unreadable ({e.strerror or e})") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{path}: not a {FORMAT} manifest")
    if doc.get("version") != VERSION:
        raise ValueError(f"{path}: unsupported store version {doc.get('version')!r} (expected {VERSION})")
    problem = _manifest_problem(doc)
    if problem is not None:
        raise StoreError(f"{path}: {problem}")
    known = {"format", "version", "dictionary", "partitions", "graphs", "sources", "loader"}
    return Manifest(
        dictionary=str(doc.get("dictionary") or DEFAULT_DICTIONARY),
        partitions=int(doc["partitions"]),
        graphs=tuple(_entry(g) for g in doc.get("graphs", [])),
        sources=tuple(str(s) for s in doc.get("sources", [])),
        loader=str(doc.get("loader", "python")),
        extra={k: v for k, v in doc.items() if k not in known},
    )


def _manifest_problem(doc: dict[str, object]) -> str | None:
    """What makes a manifest unusable (a wrong answer or a crash would follow), else ``None``."""
    parts = doc.get("partitions")
    if type(parts) is not int or parts < 1:
        return f"'partitions' must be a positive integer, got {parts!r}"
    graphs = doc.get("graphs")
    if not isinstance(graphs, list):
        return f"'graphs' must be a list, got {type(graphs).__name__}"
    for g in graphs:
        gdir = g.get("dir") if isinstance(g, dict) else None
        if not isinstance(gdir, str) or not gdir or gdir in (".", "..") or "/" in gdir or "\\" in gdir:
            return f"bad graph entry {g!r} (its 'dir' must name a folder of {GRAPHS}/)"
        n = g.get("triples", 0)
        if type(n) is not int or n < 0:
            return f"bad graph entry {g!r} (its 'triples' must be a count)"
    files = doc.get(FILES)
    if files is None:
        return None
    if not isinstance(files, dict):
        return f"'{FILES}' must be an object, got {type(files).__name__}"
    for rel, rec in files.items():
        if not isinstance(rec, dict):
            return f"'{FILES}' record of {rel} must be an object"
        for key in ("size", "min_size"):
            n = rec.get(key)
            if n is not None and (type(n) is not int or n < 0):
                return f"'{FILES}' record of {rel}: {key} must be a byte count, got {n!r}"
    return None


def iter_partitions(
    store_dir: str | os.PathLike[str],
    graph: str | None | GraphEntry,
    *,
    mmap: bool = False,
    manifest: Manifest | None = None,
) -> Iterator[np.ndarray]:
    """The partition arrays of one graph (missing partition files count as empty).

    Args:
        store_dir: the store directory.
        graph: the graph's IRI (``None`` = default graph) or its entry.
        mmap: memory-map the files instead of reading them.
        manifest: the parsed manifest (read if not given).
    """
    m = manifest or read_manifest(store_dir)
    entry = graph if isinstance(graph, GraphEntry) else m.graph(graph)
    if entry is None:
        return
    recs = _records(m)
    for k in range(m.partitions):
        path = partition_path(store_dir, entry.dir, k)
        if not path.exists():
            if Path(store_dir, GRAPHS, entry.dir, path.name).relative_to(store_dir).as_posix() in recs:
                raise StoreError(f"damaged store {store_dir}: {path}: missing")
            continue
        try:
            arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
        except Exception as e:  # numpy raises ValueError, OSError, tokenize errors ... on a bad header
            reason = " ".join(str(e).split()) or type(e).__name__
            raise StoreError(
                f"damaged store {store_dir}: {path}: not a readable .npy array ({reason})"
            ) from e
        if arr.dtype != np.int64 or arr.ndim != 2 or arr.shape[1] != 3:
            raise ValueError(f"{path}: expected an (n, 3) int64 array, got {arr.dtype} {arr.shape}")
        yield arr


def read_graph(
    store_dir: str | os.PathLike[str], graph: str | None | GraphEntry, *, manifest: Manifest | None = None
) -> np.ndarray:
    """All triples of one graph as one ``(n, 3)`` int64 array (partition order)."""
    parts = list(iter_partitions(store_dir, graph, manifest=manifest))
    if not parts:
        return np.empty((0, 3), dtype=np.int64)
    return np.ascontiguousarray(np.concatenate(parts))


def resolve_dictionary_uri(store_dir: str | os.PathLike[str], uri: str) -> str:
    """``uri`` with a relative ``lmdb:`` path made relative to the store directory."""
    scheme, _, rest = uri.partition(":")
    if scheme.lower() == "lmdb":
        path = rest[2:] if rest.startswith("//") else rest
        if path and not os.path.isabs(path):
            return "lmdb:" + str(Path(store_dir).resolve() / path)
    return uri


def open_store_dictionary(store_dir: str | os.PathLike[str], manifest: Manifest | None = None) -> Dictionary:
    """Open the dictionary a store directory's manifest names."""
    m = manifest or read_manifest(store_dir)
    uri = resolve_dictionary_uri(store_dir, m.dictionary)
    scheme, _, path = uri.partition(":")
    if scheme.lower() == "lmdb" and not os.path.isdir(path[2:] if path.startswith("//") else path):
        # opening would create an empty dictionary there: every id would then decode to nothing
        raise StoreError(f"damaged store {store_dir}: its dictionary {uri} is missing")
    return open_dictionary(uri)


def _entry(doc: object) -> GraphEntry:
    if not isinstance(doc, dict) or "dir" not in doc:
        raise ValueError(f"bad graph entry in store manifest: {doc!r}")
    iri = doc.get("iri")
    return GraphEntry(None if iri is None else str(iri), str(doc["dir"]), int(doc.get("triples", 0)))
