"""The results of a live cluster, readable on every coordinator: :class:`ResultLog`.

Every coordinator of ``run --zk`` holds a *result log*: the reports of every query, in
the order the leader made them, each entry numbered (``seq``) and bounded by
``--results-retention`` seconds.  The leader appends one entry per report time (the lines
of every query due then) and one per unregistered query (its subscriptions end);
standbys *follow* it over HTTP (``GET /_cluster/results?after=SEQ``, a long poll on
the leader's API, see :func:`serve_log`), so any coordinator serves
``GET /queries/{name}/results`` from its own copy, and a subscriber that reconnects to
another coordinator -- with ``Last-Event-ID`` or ``?after=`` -- resumes there.

What it guarantees:

* **Nothing is delivered before it is replicated.**  An entry is *committed* once every
  in-sync follower (one that polled within ``sync_s`` seconds) has it -- its next poll's
  ``after`` acknowledges it; only committed entries reach subscribers, on the leader
  and on the followers.  So when the leader dies, every line any subscriber saw is in
  the log of every in-sync standby, the next leader included.
* **A new leader repairs, then continues the order.**  Before it serves, a newly
  elected leader takes, from every other live coordinator, the entries after its own
  last (a follower may have received entries the dead leader had not committed yet),
  commits them, and numbers its own entries after them.  Its live engine starts at the
  latest report time of the log (an explicit watermark): report times only grow, so a
  result id never names two different lines.
* **Resume is exact within the retention.**  A reader resuming after a result id gets
  every later line of the kept reports once, then the live ones; if some report after
  the id was dropped already (older than the retention, or before this coordinator
  started following) the answer is 410, never a silent gap.

Limits: reports the old leader made but no follower received are lost with it (as are
the elements it had ingested and not ticked); a follower that falls out of sync (no
poll for ``sync_s``) stops holding back the commit, and if it is then elected it serves
what it has (the repair fills the gap from any coordinator that has more; it restores a
cluster checkpoint its log holds the last report of, so that the replay of the ingest log
makes the report times it lacks again, see ``cluster.checkpoints._load``).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, compress, repeat
from operator import is_not
from typing import Any

import httpx
import msgpack

from linkstream.engine.live.subscription import (
    RESULTS_MAX_LINES,
    RESULTS_RETENTION_S,
    Cursor,
    Item,
    Lines,
    ResultsGone,
    Subscription,
    reports_after,
)
from linkstream.engine.render import JoinedLines

logger = logging.getLogger(__name__)

#: where a standby polls the leader's (or, during a repair, any coordinator's) log
LOG_PATH = "/_cluster/results"
#: a follower that did not poll for this long no longer holds back the commit
SYNC_S = 3.0
#: most entries answered to one poll
BATCH = 512
#: the media type of a msgpack answer (a follower asks for it with ``Accept``)
LOG_MSGPACK = "application/x-msgpack"
#: the media type of a msgpack answer whose reports are each one text (the lines joined by
#: ``"\\n"``) instead of an array of lines; a follower asks for it first, a leader that
#: predates it answers :data:`LOG_MSGPACK` (or JSON), told apart by the ``Content-Type``
LOG_BLOCKS = "application/vnd.linkstream.log-blocks+msgpack"
#: the media type of a msgpack answer whose entries are each one row of the entry's query
#: names, the positions, text sizes and line counts of the reports with lines, and their
#: texts joined in one string (as a container's result frame: :meth:`Entry.packed`); a
#: follower asks for it first, a leader that predates it answers :data:`LOG_BLOCKS`
LOG_FRAMES = "application/vnd.linkstream.log-frames+msgpack"


@dataclass
class Entry:
    """One report time (``reports``: lines per due query) or the end of queries (``ended``)."""

    seq: int
    t: int
    reports: dict[str, Sequence[str]]  # (not copied: nothing changes a report's lines)
    ended: tuple[str, ...] = ()
    at: float = 0.0  # monotonic time it was added here
    #: :meth:`packed`, made once (the fields do not change once the entry is held)
    _packed: bytes | None = field(default=None, repr=False, compare=False)
    #: :meth:`packed` with ``blocks``, made once
    _blocks: bytes | None = field(default=None, repr=False, compare=False)
    #: :meth:`packed` with ``frames``, made once
    _frames: bytes | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> list[Any]:
        return [self.seq, self.t, {k: list(v) for k, v in self.reports.items()}, list(self.ended)]

    def packed(self, blocks: bool = False, frames: bool = False) -> bytes:
        """:meth:`to_json`'s row as msgpack, encoded on the first call only: a poll's answer
        joins these bytes instead of encoding every line of every entry again
        (:meth:`ResultLog.answer_packed`).  With ``blocks`` each query's lines are one
        string, joined by ``"\\n"`` (what a :class:`~linkstream.engine.render.JoinedLines`
        holds already: no line is split or encoded on its own; :data:`LOG_BLOCKS`).

        With ``frames`` (:data:`LOG_FRAMES`) the row is ``[seq, t, names, at, sizes, counts,
        text, ended]``: every due query's name, then only the reports with lines -- their
        positions in ``names``, text sizes (characters) and line counts -- and their texts
        joined in one string.  Most due queries report nothing at a report time: their
        reports cost no Python step here nor when the row is read (:meth:`from_json`)."""
        if frames:
            if self._frames is None:
                names, values = list(self.reports), list(self.reports.values())
                # (the empty reports -- the shared empty tuple -- skipped at C speed)
                at = list(compress(range(len(values)), map(is_not, values, repeat(()))))
                got = list(map(values.__getitem__, at))
                texts = [v.text if type(v) is JoinedLines else "\n".join(v) for v in got]
                row = [self.seq, self.t, names, at, list(map(len, texts)), list(map(len, got))]
                self._frames = msgpack.packb([*row, "".join(texts), self.ended], use_bin_type=True)
            return self._frames
        if blocks:
            if self._blocks is None:
                # (joined_text inlined: one Python call per query and entry was half of it)
                blocks_of = {
                    k: v.text if type(v) is JoinedLines else "\n".join(v) for k, v in self.reports.items()
                }
                self._blocks = msgpack.packb([self.seq, self.t, blocks_of, self.ended], use_bin_type=True)
            return self._blocks
        if self._packed is None:
            lists = {k: v if type(v) in (list, tuple) else list(v) for k, v in self.reports.items()}
            self._packed = msgpack.packb([self.seq, self.t, lists, self.ended], use_bin_type=True)
        return self._packed

    @staticmethod
    def from_json(row: list[Any]) -> Entry:
        """The entry of a row of :meth:`to_json` or :meth:`packed` (a query's lines as a list,
        with ``blocks`` as one string, with ``frames`` the row of the reports with lines).

        Raises:
            ValueError: A ``frames`` row whose parts do not fit together.
        """
        if len(row) == 8:
            return Entry._from_frames(row)
        seq, t, reports, ended = row
        # a block (LOG_BLOCKS) is a str, else a list of lines (no call per query but JoinedLines')
        got: dict[str, Sequence[str]] = {
            k if type(k) is str else str(k): (JoinedLines(v) if v else ()) if type(v) is str else tuple(v)
            for k, v in reports.items()
        }
        return Entry(int(seq), int(t), got, tuple(ended))

    @staticmethod
    def _from_frames(row: list[Any]) -> Entry:
        seq, t, names, at, sizes, counts, text, ended = row
        if not (
            type(names) is list
            and type(text) is str
            and len(at) == len(sizes) == len(counts)
            and all(not xs or (set(map(type, xs)) <= {int} and min(xs) >= 0) for xs in (at, sizes, counts))
            and sum(sizes) == len(text)
            and (not at or max(at) < len(names))
            and set(map(type, names)) <= {str}  # (at C speed: an entry names every due query)
        ):
            raise ValueError("result log entry: names, positions, sizes and text do not fit")
        reports: dict[str, Sequence[str]] = dict.fromkeys(names, ())
        ends = list(accumulate(sizes))
        cuts = map(
            slice, [0, *ends[:-1]], ends
        )  # (at C speed: a step per report with lines is its JoinedLines)
        reports.update(zip(map(names.__getitem__, at), map(JoinedLines, map(text.__getitem__, cuts), counts)))
        return Entry(int(seq), int(t), reports, tuple(ended))


class ResultLog:
    """The replicated result log of one coordinator (see the module docstring).

    A query's kept reports are found in the entries themselves when a reader resumes
    (:meth:`after`): a commit does nothing per query but offer the entry to the subscribed
    ones, so it costs the same with 10 registered queries or 10,000.  What a per-query ring
    kept is what :meth:`after` finds: the committed reports with lines within the retention,
    at most ``max_lines`` lines per query (the newest), and a resume after a report no longer
    kept raises :class:`ResultsGone`.

    Args:
        retention_s: Wall-clock seconds entries (and each query's reports) are kept.
        max_entries: Most entries kept, whatever their age.
        subscriber_queue: Default lines a subscriber may have pending.
        sync_s: See :data:`SYNC_S`.
        clock: Monotonic clock in seconds.
        max_lines: Most result lines of one query a resume finds (its newest reports).
    """

    def __init__(
        self,
        retention_s: float = RESULTS_RETENTION_S,
        *,
        max_entries: int = 200_000,
        subscriber_queue: int = 10_000,
        sync_s: float = SYNC_S,
        clock: Callable[[], float] = time.monotonic,
        max_lines: int = RESULTS_MAX_LINES,
    ) -> None:
        self.retention_s = retention_s
        self.max_lines = max(1, max_lines)
        self.max_entries = max_entries
        self.subscriber_queue = subscriber_queue
        self.sync_s = sync_s
        self.clock = clock
        self.cond = threading.Condition()
        self.entries: deque[Entry] = deque()
        self.last = 0  # seq of the last entry held
        self.committed = 0  # seq of the last entry delivered to subscribers
        self.committed_t: int | None = None  # report time of that entry
        self.max_t: int | None = None  # latest report time ever held (dropped entries too)
        self.leading = False
        #: query -> latest report time with lines whose entry was dropped here (the retention)
        self.dropped: dict[str, int] = {}
        #: query -> seq of the entry that ended it (its reports before are not its new ones')
        self.ended: dict[str, int] = {}
        self.subs: dict[str, list[Subscription]] = {}
        self.followers: dict[str, tuple[int, float]] = {}  # id -> (acknowledged seq, last poll)
        self.gone: dict[str, int] = {}  # query -> latest report time dropped before it was held here

    # ------------------------------------------------------------------ leader side

    def append(self, t: int, reports: dict[str, Sequence[str]], ended: Iterable[str] = ()) -> int:
        """Adds an entry (leader); committed at once when no follower is in sync."""
        with self.cond:
            self.last += 1
            self._hold(Entry(self.last, t, reports, tuple(ended), self.clock()))
            self._recommit()
            self.cond.notify_all()
            return self.last

    def ack(self, follower: str, seq: int) -> None:
        """A follower holds every entry up to ``seq`` (its poll's ``after``)."""
        with self.cond:
            self.followers[follower] = (min(seq, self.last), self.clock())
            self._recommit()

    def expire(self) -> None:
        """Forgets followers that stopped polling (they no longer hold back the commit)."""
        with self.cond:
            self._recommit()
            self._trim()

    def _recommit(self) -> None:
        if not self.leading:
            return
        now = self.clock()
        for fid in [f for f, (_, seen) in self.followers.items() if now - seen > self.sync_s]:
            logger.warning("result log: follower %s out of sync (no poll for %.1f s)", fid, self.sync_s)
            del self.followers[fid]
        upto = min((seq for seq, _ in self.followers.values()), default=self.last)
        self._commit(upto)

    # ------------------------------------------------------------------ follower side

    def follow(self, answer: dict[str, Any]) -> None:
        """Applies a poll's answer (``entries``, ``committed``, ``gone``) from the leader."""
        with self.cond:
            if self.leading:
                return
            for name, t in (answer.get("gone") or {}).items():
                self._mark_gone(str(name), int(t))
            for row in answer.get("entries") or ():
                e = Entry.from_json(row)
                if e.seq <= self.last:
                    continue
                if e.seq != self.last + 1:  # entries went missing between: what they held is gone
                    for name in e.reports:
                        self._mark_gone(name, e.t - 1)
                e.at = self.clock()
                self.last = e.seq
                self._hold(e)
            leader_last = int(answer.get("last", self.last))
            if leader_last < self.committed:
                # a new leader numbers on from what it repaired: we are ahead only by what
                # nobody committed; keep our deliveries, number on from the leader's
                logger.info("result log: leader at %d, behind our %d", leader_last, self.committed)
            if leader_last < self.last:
                while self.entries and self.entries[-1].seq > max(leader_last, self.committed):
                    self.entries.pop()
                self.last = max(leader_last, self.committed)
            self._commit(min(int(answer.get("committed", 0)), self.last))
            self.cond.notify_all()

    def take(self, after: int, limit: int = BATCH) -> list[Entry]:
        """Entries after ``after`` (for a follower or a repairing leader)."""
        with self.cond:
            return [e for e in self.entries if e.seq > after][:limit]

    def _select(self, after: int, follower: str | None) -> tuple[list[Entry], dict[str, Any]]:
        """A poll's entries after ``after`` (at most :data:`BATCH`) and its head: the commit
        point and, when the asker missed entries no longer kept, what is gone."""
        if follower and self.leading:
            self.ack(follower, after)
        with self.cond:
            entries = [e for e in self.entries if e.seq > after][:BATCH]
            head: dict[str, Any] = {"leading": self.leading, "last": self.last, "committed": self.committed}
            first = self.entries[0].seq if self.entries else self.last + 1
            if after + 1 < first:  # the asker missed entries no longer kept
                head["gone"] = {**self.gone, **self.dropped}
        return entries, head

    def answer(self, after: int, follower: str | None) -> dict[str, Any]:
        """The body of a poll: entries after ``after``, the commit point, what is gone."""
        entries, head = self._select(after, follower)
        return {**head, "entries": [e.to_json() for e in entries]}

    def answer_packed(
        self, after: int, follower: str | None, blocks: bool = False, frames: bool = False
    ) -> bytes:
        """:meth:`answer` as one msgpack map, its ``entries`` the entries' :meth:`Entry.packed`
        bytes joined under an array header (the same content as the JSON answer: what a
        follower decodes with :func:`decode_answer` equals :meth:`answer`; with ``blocks``
        each report is one text, :data:`LOG_BLOCKS`; with ``frames`` each entry one row of
        its reports with lines, :data:`LOG_FRAMES`)."""
        entries, head = self._select(after, follower)
        # (outside the lock: an entry's bytes depend on the entry alone)
        packer = msgpack.Packer(use_bin_type=True)
        parts = [packer.pack_map_header(len(head) + 1)]
        for k, v in head.items():
            parts += [packer.pack(k), packer.pack(v)]
        parts += [packer.pack("entries"), packer.pack_array_header(len(entries))]
        parts += [e.packed(blocks, frames) for e in entries]
        return b"".join(parts)

    def wait(self, after: int, committed: int, timeout: float) -> None:
        """Blocks until an entry after ``after`` or a commit past ``committed`` exists."""
        end = self.clock() + timeout
        with self.cond:
            while self.last <= after and self.committed <= committed:
                left = end - self.clock()
                if left <= 0:
                    return
                self.cond.wait(left)

    def lead(self, repaired: Iterable[Entry]) -> int | None:
        """Becomes the leader's log: adds the repaired entries, commits all; returns the
        latest report time held (the new leader's engine starts there)."""
        with self.cond:
            self.leading = True
            for e in repaired:
                if e.seq == self.last + 1:
                    e.at = self.clock()
                    self.last = e.seq
                    self._hold(e)
            self.followers.clear()
            self._commit(self.last)
            self.cond.notify_all()
            return self.max_t

    def step_down(self) -> None:
        """No longer leads (follows the next leader)."""
        with self.cond:
            self.leading = False
            self.followers.clear()

    # ------------------------------------------------------------------ both

    def _hold(self, e: Entry) -> None:
        self.entries.append(e)
        if e.reports:
            self.max_t = e.t if self.max_t is None else max(self.max_t, e.t)
        self._trim()

    def _trim(self) -> None:
        now = self.clock()
        q = self.entries
        while (
            q
            and q[0].seq <= self.committed
            and (len(q) > self.max_entries or now - q[0].at > self.retention_s)
        ):
            self._drop(q.popleft())

    def _drop(self, e: Entry) -> None:
        """Notes the reports with lines of an entry no longer held (a resume before them is
        answered :class:`ResultsGone`): once per entry, when it goes."""
        ended, dropped = self.ended, self.dropped
        reports = e.reports
        for name in compress(reports, reports.values()):  # (the reports with lines: at C speed)
            if e.seq > ended.get(name, 0):
                dropped[name] = e.t
        for name in e.ended:
            if ended.get(name) == e.seq:  # nothing of it before its end is held any more
                del ended[name]

    def _mark_gone(self, name: str, t: int) -> None:
        self.gone[name] = max(self.gone.get(name, t), t)

    def _commit(self, upto: int) -> None:
        """Delivers the held entries up to ``upto`` (under the lock)."""
        if upto <= self.committed:
            return
        pending = []  # (from the newest: the held entries up to the last committed are many)
        for e in reversed(self.entries):
            if e.seq <= self.committed:
                break
            pending.append(e)
        for e in reversed(pending):  # (nothing per query: a resume finds its reports in the entries)
            if e.seq > upto:
                break
            if self.subs:  # (few queries have subscribers: looked up from their side)
                for name, subs in self.subs.items():
                    got = e.reports.get(name)
                    if got is not None:
                        for sub in subs:
                            sub.offer(e.t, got)
            for name in e.ended:
                self.ended[name] = e.seq
                self.dropped.pop(name, None)
                self.gone.pop(name, None)
                for sub in self.subs.pop(name, ()):
                    sub.finish()
            self.committed_t = e.t if self.committed_t is None else max(self.committed_t, e.t)
        self.committed = upto

    def subscribe(self, name: str, maxlen: int | None = None, after: Cursor | None = None) -> Subscription:
        """A subscription to ``name``'s committed reports, from the next or after ``after``.

        Raises:
            ResultsGone: Some report after ``after`` is no longer kept here.
        """
        with self.cond:
            kept = []
            if after is not None:
                dropped = self.gone.get(name)
                if dropped is not None and dropped > after[0]:
                    raise ResultsGone("results of %s after %d are not kept here" % (name, after[0]))
                kept = self.after(name, after)
            sub = Subscription(name, maxlen or self.subscriber_queue, self._unsubscribe, position=after)
            for t, lines, first in kept:
                sub.offer(t, lines, first)
            if after is not None and self.committed_t is not None:
                # no report at or before the last committed report time is delivered any more
                # (only reports with lines are found on resume): a resumed ``?until=`` there ends now
                sub.offer(self.committed_t, ())
            self.subs.setdefault(name, []).append(sub)
            return sub

    def after(self, name: str, cursor: Cursor) -> list[Item]:
        """``name``'s committed reports with lines after ``cursor``, the first one possibly
        partial (as :meth:`~linkstream.engine.live.subscription.ReportRing.after` of a ring
        fed every committed report gives them).

        Found in the entries, from the newest back to the cursor's report time (report times
        only grow along the log): the entries older than the retention go first, then the
        newest reports up to ``max_lines`` lines are kept.

        Raises:
            ResultsGone: A report of ``name`` after ``cursor`` is no longer kept.
        """
        t0 = cursor[0]
        with self.cond:
            self._trim()
            dropped = self.dropped.get(name)
            floor, committed, budget = self.ended.get(name, 0), self.committed, self.max_lines
            found: list[tuple[int, Lines]] = []  # newest first
            for e in reversed(self.entries):
                if e.seq > committed:
                    continue
                if e.seq <= floor or e.t < t0:  # (a report before the cursor matters to no one)
                    break
                lines = e.reports.get(name)
                if not lines:
                    continue
                budget -= len(lines)
                if budget < 0:  # this one and older ones are past the line budget
                    dropped = e.t if dropped is None else max(dropped, e.t)
                    break
                found.append((e.t, lines))
        return reports_after(cursor, reversed(found), dropped, found[-1][0] if found else None)

    def _unsubscribe(self, sub: Subscription) -> None:
        with self.cond:
            subs = self.subs.get(sub.query)
            if subs is not None and sub in subs:
                subs.remove(sub)

    def subscribers(self, name: str) -> int:
        with self.cond:
            return len(self.subs.get(name, ()))

    def close(self) -> None:
        """Ends every subscription."""
        with self.cond:
            subs = [s for group in self.subs.values() for s in group]
            self.subs.clear()
        for s in subs:
            s.finish()


#: cyclic GC thresholds of a coordinator process, at least (see :func:`tune_gc`)
GC_THRESHOLDS = (50_000, 20, 10)


def tune_gc() -> None:
    """Sets a coordinator process's cyclic GC for the heap the result log makes (once, at start).

    The log keeps every report of every query for the retention (an entry, a ring item and a
    :class:`~linkstream.engine.render.JoinedLines` per reported query and tick): with the
    default thresholds a young collection runs every 700 such objects, every few hundred
    reports, and the full ones go through the whole log.  In a simulation of the leader's
    tick path (4,000 queries, 1,500 report times) the collector took 30% of the CPU with the
    defaults, 13% with :data:`GC_THRESHOLDS`.  What the process holds once started (modules,
    parsed statics) is frozen: never traversed again.  Thresholds set higher are kept.
    """
    gc.set_threshold(*(max(a, b) for a, b in zip(gc.get_threshold(), GC_THRESHOLDS, strict=True)))
    gc.freeze()


def decode_answer(content_type: str | None, body: bytes) -> dict[str, Any]:
    """A poll's answer as :meth:`ResultLog.answer` gives it, from its JSON or msgpack body.

    Raises:
        ValueError: Not a map in either encoding.
    """
    if (content_type or "").split(";")[0].strip().lower() in (LOG_MSGPACK, LOG_BLOCKS, LOG_FRAMES):
        try:
            doc = msgpack.unpackb(body, raw=False)
        except (msgpack.UnpackException, ValueError) as exc:
            raise ValueError(f"result log answer: {exc}") from exc
    else:
        import json

        doc = json.loads(body)
    if not isinstance(doc, dict):
        raise ValueError("result log answer: not a map")
    return doc


def fetch_log(http: httpx.Client, url: str, params: dict[str, str], **kw: Any) -> dict[str, Any]:
    """One poll of the result log the coordinator at API ``url`` holds (asks for
    :data:`LOG_FRAMES`; a :data:`LOG_BLOCKS`, :data:`LOG_MSGPACK` or JSON answer, from a
    coordinator that predates it, is read as well).

    Raises:
        httpx.HTTPError: The request failed or was refused.
        ValueError: The answer is no result log.
    """
    accept = {"Accept": f"{LOG_FRAMES}, {LOG_BLOCKS};q=0.95, {LOG_MSGPACK};q=0.9, application/json;q=0.5"}
    r = http.get(url.rstrip("/") + LOG_PATH, params=params, headers=accept, **kw)
    r.raise_for_status()
    return decode_answer(r.headers.get("content-type"), r.content)


async def serve_log(
    log: ResultLog, query: dict[str, str], *, packed: bool = False, blocks: bool = False, frames: bool = False
) -> dict[str, Any] | bytes:
    """The answer to ``GET /_cluster/results?after=&committed=&wait=&follower=`` (asyncio):
    the map of :meth:`ResultLog.answer`, or with ``packed`` its msgpack bytes
    (:meth:`ResultLog.answer_packed`, encoded off the event loop; ``blocks``: each report
    one text, :data:`LOG_BLOCKS`; ``frames``: :data:`LOG_FRAMES`)."""
    import asyncio

    def num(key: str, default: float) -> float:
        try:
            return float(query.get(key, default))
        except ValueError:
            return default

    after, committed = int(num("after", 0)), int(num("committed", 0))
    wait = min(max(num("wait", 0.0), 0.0), 30.0)
    follower = query.get("follower") or None
    if follower and log.leading:
        log.ack(follower, after)
    if packed:

        def waited() -> bytes:
            if wait > 0:
                log.wait(after, committed, wait)
            return log.answer_packed(after, follower, blocks, frames)

        return await asyncio.to_thread(waited)
    if wait > 0:
        await asyncio.to_thread(log.wait, after, committed, wait)
    return log.answer(after, follower)


__all__ = [
    "BATCH",
    "LOG_BLOCKS",
    "LOG_FRAMES",
    "LOG_MSGPACK",
    "LOG_PATH",
    "SYNC_S",
    "Entry",
    "ResultLog",
    "ResultsGone",
    "decode_answer",
    "fetch_log",
    "serve_log",
    "tune_gc",
]
