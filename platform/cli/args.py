"""Argument helpers shared by every command group of the ``linkstream`` command.

Public so that each command module (``cli/service.py``, ``cli/cluster.py`` ...) uses the same
``IRI=PATH`` parsing and the same one-line ``error:`` output as ``cli/main.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from typing import Any
from urllib.parse import urljoin

DEFAULT_BASE = "http://localhost/"


def resolve(iri: str, base: str) -> str:
    """``iri`` made absolute against ``base`` (unchanged when it already has a scheme)."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*:", iri):
        return iri
    return urljoin(base, iri)


def split_binding(arg: str, base: str) -> tuple[str | None, str]:
    """``IRI=PATH`` -> (absolute IRI, PATH); ``PATH`` -> (None, PATH) -- as the oracle does."""
    if "=" in arg:
        k, v = arg.split("=", 1)
        k = k.strip()
        if k.startswith("<") and k.endswith(">"):
            k = k[1:-1]
        return resolve(k, base), v
    return None, arg


def stream_bindings(args: list[str], base: str) -> list[tuple[str, str]] | str:
    """``--stream IRI=PATH`` arguments as (IRI, PATH) pairs, or the error message."""
    from linkstream.rdf.ntriples import iri_error

    streams = []
    seen: dict[str, str] = {}
    for arg in args:
        iri, path = split_binding(arg, base)
        if iri is None:
            return f"--stream needs IRI=PATH, got {arg!r}"
        problem = iri_error(iri)
        if problem is not None:
            return f"--stream {arg!r}: {problem}"
        if iri in seen:
            return f"--stream <{iri}> is given twice ({seen[iri]} and {path})"
        if not os.path.exists(path):
            return f"stream file {path!r} does not exist"
        if os.path.isdir(path):
            return f"stream file {path!r} is a directory"
        seen[iri] = path
        streams.append((iri, path))
    return streams


def base_error(base: str) -> str | None:
    """Why ``--base`` cannot resolve relative IRIs (it must be an absolute IRI), else ``None``."""
    from linkstream.rdf.ntriples import iri_error

    problem = iri_error(base)
    return None if problem is None else f"--base {base!r} is not an absolute IRI: {problem}"


def number_error(flag: str, value: float | None, low: float, *, strict: bool = False) -> str | None:
    """``flag must be >= low`` (``> low`` when ``strict``) for a bad ``value``; ``None`` passes."""
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{flag} must be a finite number, got {value}"
    if value < low or (strict and value == low):
        return f"{flag} must be {'>' if strict else '>='} {low:g}, got {value:g}"
    return None


def run_number_error(args: argparse.Namespace) -> str | None:
    """The first bad number among ``linkstream run``'s event-time flags, else ``None``."""
    return (
        number_error("--default-step", args.default_step, 1)
        or number_error("--idle-ms", args.idle_ms, 0)
        or number_error("--retention-ms", args.retention_ms, 0)
        or number_error("--results-retention", args.results_retention, 0)
    )


def one_line_errors(parser: argparse.ArgumentParser) -> None:
    """Makes ``parser`` and every subcommand parser under it report a usage error as one
    line (``error: ... (see PROG --help)``, exit status 2) instead of the long usage text."""

    def error(message: str, prog: str = parser.prog) -> Any:
        print(f"error: {message} (see {prog} --help)", file=sys.stderr)
        sys.exit(2)

    parser.error = error  # type: ignore[method-assign]  # argparse has no hook for its usage-error output
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                one_line_errors(sub)


def err(msg: str) -> int:
    """Prints ``error: msg`` to stderr and returns 2, the exit status of a usage error."""
    print("error: " + msg, file=sys.stderr)
    return 2


def finish_replay(
    args: argparse.Namespace,
    res: Any,
    log: Any,
    *,
    where: str,
    stats: dict[str, Any],
) -> float:
    """The end of a cluster replay: the summary line (unless ``--quiet``) and ``--stats FILE``.

    ``res`` is the replay's :class:`~linkstream.engine.replay.ReplayResult`-like totals
    (``triples``, ``elements``, ``seconds``, ``rows``); ``where`` ends the summary line (on
    which containers, what it cost); ``stats`` are the fields that path adds to the JSON
    written to ``--stats`` after the common ``triples``/``elements``/``seconds``/
    ``triples_per_s``/``rows``.  Returns the triples/s rate.
    """
    rate = float(res.triples / res.seconds) if res.seconds > 0 else 0.0
    if not args.quiet or args.stats:
        log(
            f"replayed {res.triples} triples in {res.elements} elements in {res.seconds:.2f}s "
            f"({rate:,.0f} triples/s) {where}"
        )
    if args.stats and args.stats != "-":
        body = {
            "triples": res.triples,
            "elements": res.elements,
            "seconds": res.seconds,
            "triples_per_s": rate,
            "rows": res.rows,
            **stats,
        }
        with open(args.stats, "w", encoding="utf-8") as f:
            json.dump(body, f, indent=1)
    return rate


def use_parse_cache() -> None:
    """Turns on the on-disk parse cache of query algebra where the settings put it
    (``[query] parse_cache``, see :mod:`linkstream.query.parse_store`).

    Settings that cannot be read leave it off: the cache only saves time, and the command
    never read settings before it had one.
    """
    from linkstream.config import ConfigError, load
    from linkstream.query import parse_store

    try:
        parse_store.configure(load().query.parse_cache_dir())
    except ConfigError:
        parse_store.configure(None)


def preload_query_parser() -> None:
    """Imports rdflib's SPARQL parser now: a server (``run``, ``container``) parses queries
    anyway, and pays the import (~0.1 s) at start rather than in its first registration."""
    import linkstream.query.sparql_parser  # noqa: F401
