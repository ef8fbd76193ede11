"""Argument helpers shared by every command group of the ``linkstream`` command.

Public so that each command module (``cli/service.py``, ``cli/cluster.py`` ...) uses the same
``IRI=PATH`` parsing and the same one-line ``error:`` output as ``cli/main.py``.
"""

from __future__ import annotations

import os
import re
import sys
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
    streams = []
    for arg in args:
        iri, path = split_binding(arg, base)
        if iri is None:
            return f"--stream needs IRI=PATH, got {arg!r}"
        if not os.path.exists(path):
            return f"stream file {path!r} does not exist"
        streams.append((iri, path))
    return streams


def err(msg: str) -> int:
    """Prints ``error: msg`` to stderr and returns 2, the exit status of a usage error."""
    print("error: " + msg, file=sys.stderr)
    return 2
