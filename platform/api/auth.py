"""Bearer tokens of the HTTP API and their scopes.

A token has a name (shown in logs and used to count its queries), a scope and a secret.
Scopes are ordered, each including the ones before it:

* ``read``: ``GET`` of queries, results, ``/status``, ``/metrics``, ``/openapi.json`` and
  one-shot ``/sparql`` (``GET`` or ``POST``);
* ``write``: also registering and removing its own queries, pushing stream elements and
  advancing the watermark;
* ``admin``: also removing queries registered with other tokens.

``/healthz`` needs no token.  Tokens come from ``linkstream run --token`` (repeatable:
``NAME:SCOPE:SECRET``, or a bare ``SECRET`` for one admin token named ``admin``), from a
``--tokens-file`` (JSON ``[{"name", "scope", "secret"}]``) or from ``LINKSTREAM_API_TOKEN``
(one admin token).  Secrets are compared in constant time (:func:`hmac.compare_digest`,
against every configured token, without stopping at a match).
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: the scopes, weakest first; each includes the ones before it
SCOPES = ("read", "write", "admin")

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_SPEC = re.compile(r"^([A-Za-z0-9_.\-]{1,64}):(read|write|admin):(.*)$", re.S)


@dataclass(frozen=True)
class Token:
    """A bearer token: its name, scope and secret."""

    name: str
    scope: str
    secret: str

    def allows(self, scope: str) -> bool:
        """Whether this token's scope includes ``scope``."""
        return SCOPES.index(self.scope) >= SCOPES.index(scope)

    def __repr__(self) -> str:  # never print the secret
        return "Token(%r, %r)" % (self.name, self.scope)


#: the caller when no token is configured: everything is allowed
ANONYMOUS = Token("anonymous", "admin", "")


def _check_secret(secret: str, where: str) -> str:
    if not secret:
        raise ValueError(f"{where}: an empty token would disable authentication; omit it to run without one")
    if secret != secret.strip() or any(ord(c) < 33 or ord(c) > 126 for c in secret):
        raise ValueError(f"{where}: a token must be printable ASCII without spaces")
    return secret


def parse_token(spec: str, where: str = "--token") -> Token:
    """A token from ``NAME:SCOPE:SECRET`` or a bare ``SECRET`` (admin, named ``admin``).

    Raises:
        ValueError: An empty or unprintable secret.
    """
    m = _SPEC.match(spec)
    if m:
        return Token(m.group(1), m.group(2), _check_secret(m.group(3), where))
    return Token("admin", "admin", _check_secret(spec, where))


def load_tokens_file(path: str) -> list[Token]:
    """The tokens of a JSON file: ``[{"name", "scope", "secret"}]`` or ``{"tokens": [...]}``.

    Raises:
        ValueError, OSError: The file cannot be read or an entry is malformed.
    """
    with open(path, encoding="utf-8") as f:
        try:
            doc: Any = json.load(f)
        except (json.JSONDecodeError, RecursionError) as e:
            raise ValueError(f"{path}: not JSON: {e}") from None
    if isinstance(doc, dict):
        doc = doc.get("tokens")
    if not isinstance(doc, list):
        raise ValueError(f'{path}: expected a list of {{"name", "scope", "secret"}} objects')
    out = []
    for i, item in enumerate(doc):
        where = f"{path} entry {i}"
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) for k in ("name", "scope", "secret")
        ):
            raise ValueError(f'{where}: needs string "name", "scope" and "secret"')
        if item["scope"] not in SCOPES:
            raise ValueError(f"{where}: scope must be one of {', '.join(SCOPES)}, got {item['scope']!r}")
        if not _NAME.match(item["name"]):
            raise ValueError(f"{where}: a name is 1-64 letters, digits, '_', '.' or '-'")
        out.append(Token(item["name"], item["scope"], _check_secret(item["secret"], where)))
    return out


def check_tokens(tokens: Sequence[Token]) -> list[Token]:
    """``tokens`` if their names and secrets are distinct.

    Raises:
        ValueError: Two tokens share a name or a secret.
    """
    names: set[str] = set()
    secrets: set[str] = set()
    for t in tokens:
        if t.name in names:
            raise ValueError(f"two tokens are named {t.name!r}")
        if t.secret in secrets:
            raise ValueError(f"tokens {t.name!r} and another share a secret")
        names.add(t.name)
        secrets.add(t.secret)
    return list(tokens)


class TokenTable:
    """The configured tokens; looks a presented secret up in constant time."""

    def __init__(self, tokens: Iterable[Token]) -> None:
        self.tokens = check_tokens(list(tokens))
        self._keys = [(t.secret.encode("utf-8"), t) for t in self.tokens]

    def __bool__(self) -> bool:
        return bool(self.tokens)

    def lookup(self, authorization: bytes) -> Token | None:
        """The token of an ``Authorization: Bearer ...`` header value, or ``None``."""
        scheme, _, presented = authorization.partition(b" ")
        found = None
        ok_scheme = hmac.compare_digest(scheme.lower(), b"bearer")
        for secret, token in self._keys:  # no early exit: the time does not depend on which matched
            if hmac.compare_digest(presented, secret) and ok_scheme:
                found = token
        return found


def required_scope(method: str, path: str) -> str | None:
    """The scope a request needs (``None``: open), from its method and path."""
    if path == "/healthz":
        return None
    if method in ("GET", "HEAD", "OPTIONS") or path == "/sparql":
        return "read"
    return "write"


__all__ = [
    "ANONYMOUS",
    "SCOPES",
    "Token",
    "TokenTable",
    "check_tokens",
    "load_tokens_file",
    "parse_token",
    "required_scope",
]
