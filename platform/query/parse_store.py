"""The on-disk parse cache: a query's algebra stored as JSON, so that a later process skips
rdflib's SPARQL parser (its import builds a pyparsing grammar: ~0.1 s of a short replay).

An entry is the algebra of one parser text (what :mod:`.continuous` hands rdflib after its
dialect pass) in :mod:`.algebra_json`'s form, in a file named by the SHA-256 of

* that text, the base IRI and the dialect,
* the layout version of :mod:`.algebra_json`, rdflib's version, and a digest of the
  source of the query package (the code that turns a parse into the algebra),

so a different text, base, rdflib or LinkStream code never reads another's entry.  An entry
is written only after it was read back and compared equal to the algebra
(:func:`.algebra_json.same`), and never for an algebra the planner would still hand to
rdflib (:func:`.algebra_json.needs_parser`), through a temporary file renamed into place (readers never
see half a file), with the SHA-256 of its JSON on its first line.  An entry that cannot be
read, does not match its checksum or cannot be decoded is ignored (the query is parsed,
and the entry rewritten); nothing of the cache ever reaches the user as an error.

The directory comes from :mod:`linkstream.config` (``[query] parse_cache``, default
``~/.cache/linkstream/parse``); the command line sets it with :func:`configure`.  Without
that call (library use, tests) nothing is read or written.  It holds at most
:data:`MAX_ENTRIES` entries (counted at a process's first store and every
:data:`PRUNE_EVERY` stores): past that, the older half is deleted.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
from pathlib import Path
from typing import Any

from linkstream.query import algebra_json

log = logging.getLogger(__name__)

MAX_ENTRIES = 2000
#: the entries are counted at a process's first store and every PRUNE_EVERY stores after it
PRUNE_EVERY = 256
#: the query package's modules whose code decides an algebra (or reads it back)
_SOURCES = (
    "continuous.py",
    "template.py",
    "rules.py",
    "sparql_parser.py",
    "algebra_json.py",
    "aterms.py",
    "parse_store.py",
)

_directory: Path | None = None
_fingerprint: str | None = None
#: entries read, looked up in vain (or unreadable), and written, by this process
stats = {"hits": 0, "misses": 0, "stored": 0}


def configure(directory: str | os.PathLike[str] | None) -> None:
    """Uses ``directory`` for the cache (created when first written); ``None``: no cache."""
    global _directory
    _directory = None if directory is None else Path(directory)


def directory() -> Path | None:
    """The cache directory in use, or ``None``."""
    return _directory


def _rdflib_version() -> str:
    """rdflib's installed version, from its ``.dist-info`` directory's name when there is
    one (importing rdflib costs a short command ~0.07 s; a cache hit does not need it)."""
    spec = importlib.util.find_spec("rdflib")
    if spec is not None and spec.origin:
        site = Path(spec.origin).parent.parent
        try:
            names = sorted(
                n for n in os.listdir(site) if n.startswith("rdflib-") and n.endswith(".dist-info")
            )
        except OSError:
            names = []
        if len(names) == 1:
            return names[0][len("rdflib-") : -len(".dist-info")]
    import rdflib

    return str(rdflib.__version__)


def _code_fingerprint() -> str:
    global _fingerprint
    if _fingerprint is None:
        h = hashlib.sha256(b"format %d rdflib %s\0" % (algebra_json.FORMAT, _rdflib_version().encode()))
        here = Path(__file__).parent
        for name in _SOURCES:
            h.update(name.encode() + b"\0" + (here / name).read_bytes() + b"\0")
        _fingerprint = h.hexdigest()
    return _fingerprint


def key(parse_text: str, base: str, dialect: str) -> str | None:
    """The entry name of a parser text, or ``None`` when there is no cache."""
    if _directory is None:
        return None
    try:
        fp = _code_fingerprint()
    except OSError:  # sources not readable: no exact key, no cache
        return None
    h = hashlib.sha256(fp.encode())
    for part in (base, dialect, parse_text):
        h.update(b"\0" + part.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def load(name: str | None) -> Any:
    """The stored algebra of entry ``name`` (a :class:`.algebra_json.StoredQuery`), or ``None``."""
    if name is None or _directory is None:
        return None
    try:
        digest, _, text = (_directory / (name + ".json")).read_text(encoding="utf-8").partition("\n")
        if digest != hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest():
            raise ValueError("the entry does not match its checksum")
        query = algebra_json.loads(text)
    except Exception:  # missing, unreadable, cut short or altered: parse the query
        log.debug("no usable parse cache entry %s", name, exc_info=True)
        stats["misses"] += 1
        return None
    stats["hits"] += 1
    return query


def save(name: str | None, query: Any) -> bool:
    """Stores ``query``'s algebra as entry ``name`` if it reads back equal; True if stored."""
    if name is None or _directory is None:
        return False
    try:
        if algebra_json.needs_parser(query.algebra):
            return False
        text = algebra_json.dumps(query)
        if not algebra_json.same(query.algebra, algebra_json.loads(text).algebra):
            log.debug("the algebra does not read back equal: not cached")
            return False
        _directory.mkdir(parents=True, exist_ok=True)
        import tempfile  # (only to store: a short command's start-up skips it)

        fd, tmp = tempfile.mkstemp(dir=_directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() + "\n" + text)
            os.replace(tmp, _directory / (name + ".json"))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        stats["stored"] += 1
        if stats["stored"] % PRUNE_EVERY == 1:  # (a directory scan: not at every entry)
            _prune(_directory)
        return True
    except (OSError, ValueError, RecursionError):
        log.debug("cannot store a parse cache entry", exc_info=True)
        return False


def _prune(d: Path) -> None:
    """Deletes the older half of the entries when there are more than MAX_ENTRIES."""
    entries = [e for e in os.scandir(d) if e.name.endswith(".json") and not e.name.startswith(".")]
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(key=lambda e: e.stat().st_mtime)
    for e in entries[: len(entries) // 2]:
        Path(e.path).unlink(missing_ok=True)
