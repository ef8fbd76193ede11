"""The stats of a query served by a group (:class:`~linkstream.engine.members.MemberReports`): counted
for every member at once by the group, read per member."""

from __future__ import annotations

from typing import TYPE_CHECKING

from linkstream.engine.output import QueryStats

if TYPE_CHECKING:
    from linkstream.engine.members import MemberReports


class MemberStats(QueryStats):
    """A grouped query's stats: ``rows`` adds what the group counted for it; its
    evaluation time and latencies are its group's (one evaluation per report for all
    members)."""

    def __init__(self, group: MemberReports, mid: int, base: QueryStats) -> None:
        self._group = group
        self._mid = mid
        self._rows0 = 0
        self._secs0 = 0.0
        super().__init__(base.reports, base.rows, base.eval_seconds, base.latencies)

    @property
    def reports(self) -> int:
        return self._reports0 + self._group.nrep

    @reports.setter
    def reports(self, value: int) -> None:
        self._reports0 = int(value) - self._group.nrep

    @property
    def rows(self) -> int:
        return self._rows0 + int(self._group.acc[self._mid])

    @rows.setter
    def rows(self, value: int) -> None:
        self._rows0 = int(value) - int(self._group.acc[self._mid])

    @property
    def eval_seconds(self) -> float:
        return self._secs0 + self._group.seconds

    @eval_seconds.setter
    def eval_seconds(self, value: float) -> None:
        self._secs0 = float(value) - self._group.seconds

    @property
    def latencies(self) -> list[float]:
        return self._group.latencies

    @latencies.setter
    def latencies(self, value: list[float]) -> None:
        pass  # the group's list is every member's

    def plain(self) -> QueryStats:
        return QueryStats(self.reports, self.rows, self.eval_seconds, list(self.latencies))
