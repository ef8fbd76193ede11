"""Who registered which query: the ``max_queries_per_token`` bookkeeping of the HTTP API.

:class:`QueryOwners` counts the queries of every token (reserving before a registration,
settling after it), answers 429 past :attr:`~linkstream.api.limits.ApiLimits.max_queries_per_token`,
and refuses (403) to remove a query registered with another token unless the caller has
scope ``admin``.  The token of a request is the one :class:`~linkstream.api.guard.ApiGuard`
checked (anonymous, i.e. admin, when the API has no tokens).
"""

from __future__ import annotations

from collections import Counter

from starlette.requests import Request

from linkstream.api.auth import ANONYMOUS, Token
from linkstream.api.backend import LiveBackend
from linkstream.api.errors import ApiError
from linkstream.api.guard import TOKEN_KEY
from linkstream.api.limits import ApiLimits, LimitExceeded


def request_token(request: Request) -> Token:
    """The caller's token (set by :class:`~linkstream.api.guard.ApiGuard`)."""
    return request.scope.get(TOKEN_KEY, ANONYMOUS)


class QueryOwners:
    """The owner token of every query registered through this API, and counts per token."""

    def __init__(self, live: LiveBackend, limits: ApiLimits) -> None:
        self.live = live
        self.limits = limits
        self._owner: dict[str, str] = {}  # query name -> name of the token that registered it
        self._owned: Counter[str] = Counter()  # token name -> queries (and reservations)

    def reserve(self, request: Request, n: int) -> Token:
        """Counts ``n`` queries about to be registered against the caller's token (429 if over)."""
        tok = request_token(request)
        most = self.limits.max_queries_per_token
        if self._owned[tok.name] + n > most:  # forget queries removed by other means, then recheck
            live = set(self.live.query_names())
            for name in [q for q in self._owner if q not in live]:
                self._owned[self._owner.pop(name)] -= 1
        if self._owned[tok.name] + n > most:
            raise LimitExceeded(
                429,
                "max_queries_per_token",
                most,
                "token %r has %d queries registered; %d more would pass the limit"
                % (tok.name, self._owned[tok.name], n),
                "header Authorization",
            )
        self._owned[tok.name] += n
        return tok

    def settle(self, tok: Token, reserved: int, registered: list[str]) -> None:
        """Records the owners of ``registered`` and returns the unused reservations."""
        for name in registered:
            self._owner[name] = tok.name
        self._owned[tok.name] -= reserved - len(registered)

    def check_remove(self, request: Request, name: str) -> str | None:
        """The owner of ``name``; 403 unless the caller registered it or has scope ``admin``."""
        tok, owner = request_token(request), self._owner.get(name)
        if owner is None:  # registered before this process served (a cluster's registry knows)
            lookup = getattr(self.live, "query_owner", None)
            owner = lookup(name) if lookup is not None else None
        if owner is not None and owner != tok.name and not tok.allows("admin"):
            raise ApiError(
                403,
                "query %r was registered with token %r; removing it needs that token or scope admin"
                % (name, owner),
                where="header Authorization",
            )
        return owner

    def removed(self, name: str, owner: str | None) -> None:
        """``name`` (owned by ``owner``, as :meth:`check_remove` said) is unregistered."""
        if self._owner.get(name) == owner and owner is not None:
            del self._owner[name]
            self._owned[owner] -= 1


__all__ = ["QueryOwners", "request_token"]
