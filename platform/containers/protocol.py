"""How the messages between a cluster replay's driver and its operator containers travel.

The driver (:mod:`linkstream.cluster.replay`) pushes to every container's PULL endpoint;
each container pushes back to the driver's PULL endpoint.  Every message is one ZeroMQ
multipart message whose first frame is a small msgpack map (the header, ``"v"`` and
``"kind"`` always present, ``"run"`` naming the replay it belongs to); bulk data travels
in further frames as raw little-endian int64 buffers or UTF-8 text.  Nothing is pickled.
The messages as Python values (one dataclass per kind) are in
:mod:`linkstream.containers.messages`; :func:`encode` and :func:`decode` are their wire form.

Driver to container:

``els`` / ``sync``
    Stream elements.  Header ``{"nt": int, "k": int, "n": int}`` (plus ``"tick": int,
    "sub": int, "streams": [int]`` for ``sync``), frames: the *dictionary delta*
    (msgpack list of ``nt`` N-Triples term strings), their driver ids (``nt`` int64), the
    element table ``(3, k)`` int64 (stream index, event time, number of triples) and the
    triples ``(n, 3)`` int64 in the driver's ids.  The delta holds exactly the ids of
    these triples that this container was not sent before, so a container holds the
    terms of what it received and nothing else.  ``sync`` is the first message a
    container gets in a run (``tick``: the sequence number of the last tick sent
    before it) and the answer to each ``subscribe``: the retained backlog of the
    streams it newly subscribes to, for subscription version ``sub``; ``streams`` names
    every stream of that version (the new ones and those it already received), and from
    then on the driver sends it every element of those streams; ``"counts": [int]`` (one
    per stream of ``streams``) says how many elements of each the run had routed once the
    ``sync`` is applied: the container counts each stream's elements on from there.
``tick``
    ``{"seq", "c", "due": [query], "owners": {query: container}, "rel": {container:
    token}}``: evaluate report time ``c``; the queries in ``due`` report, each answered
    by the container ``owners`` names; ``rel`` echoes the last *unready* token the
    driver processed per container.  ``run --zk --ingest direct`` adds ``"cuts":
    {stream: count}``: how many elements of each stream the run had routed before the
    tick (counted as ``sync`` ``counts`` count them); a container evaluates the tick only
    once it has applied that many of each stream it receives.

``owned``
    ``{"stream": iri, "first": int, "nt", "k", "n"}`` then the terms (msgpack list of
    ``nt`` strings), the element table ``(2, k)`` int64 (event time, number of triples)
    and the triples ``(n, 3)`` int64 as indexes into the terms: elements of one stream
    sent by its *owner* coordinator (``run --zk --ingest direct``), the leader's applied
    counts ``first .. first + k - 1`` (:class:`~linkstream.containers.cuts.CutGate`
    orders them against the ticks' ``cuts``).  No dictionary of the sender's: each
    message carries the terms of its triples.
``handover``
    ``{"query", "dst", "seq"}``: snapshot the operator state of ``query`` (after tick
    ``seq``, the last one sent) and send it back as a ``state`` message for ``dst``.
``recompute``
    ``{"id", "queries", "ticks", "at", "nt", "k", "n"}`` then the four bulk frames of
    ``els``: rebuild ``queries`` in a scratch engine from these elements (the driver's
    retained history of their streams) and evaluate report times ``ticks``, each after
    the first ``at[i]`` elements; answer with the lines of the last one, or with ``"owe":
    int`` of that report time and those after it in ``later``
    (:mod:`linkstream.containers.recovery`: reports of a container that died).
``forward``
    A ``recompute`` header plus ``{"uri", "objects": {query: {"key", "size", "sha256"}}}``:
    ``ticks[0]`` is the report time of the last complete cluster checkpoint, whose store
    ``uri`` holds each query's task snapshot as shared object ``key``; restore them,
    feed them forward over the later report times, answer ``recomputed`` with the lines of
    report time ``owe`` (later ones: ticks sent with it, after the same elements) and keep them
    when this container owns them (:mod:`linkstream.containers.forwarding`).

Container to driver:

``hello``
    ``{"container", "address"}``: ready to receive this run's data; ``"caps": [str]`` what
    the container does (as in ``recomputed``; ``from``: see ``result``).
``subscribe``
    ``{"container", "sub", "streams"}``: version ``sub`` (increasing per run) of the set
    of stream indexes the container needs (the streams of the queries it holds or
    ZooKeeper assigned it); only in runs that route by stream.
``ready`` / ``unready``
    ``{"container", "query", "from"}``: the query is registered and may be named as
    answerer from tick ``from`` on; ``{"container", "query", "token"}``: the container
    no longer owns the query in ZooKeeper and will drop it once released.
``result``
    ``{"container", "seq", "c", "names", "sizes", "counts", "missing"}`` then one frame:
    each name's result lines joined by ``"\\n"`` (UTF-8), the blocks one after the other,
    ``sizes`` their byte lengths, ``counts`` the line counts of the non-empty blocks (in
    order; without it, or with a count that does not fit, the lines are counted when
    read).  ``missing`` names queries the tick assigned to this container that it does not
    hold, or holds but does not answer yet: ``"from": {query: tick}`` (only when any) the
    first tick it answers such a query (one kept from a ``forward`` the driver named it for
    before its *ready* came).
``failed``
    ``{"container", "query", "error"}``: the query could not be registered.
``recomputed``
    ``{"container", "id", "c", "names", "sizes", "error"}`` then the lines frame, as
    in ``result``: the answer to ``recompute`` request ``id`` (report time ``c``);
    ``"later": [[report time, {query: lines}]]`` the lines of the ticks after ``c`` it
    evaluated too, ``"caps": [str]`` what the container does (``owe``: a ``recompute``'s
    ``owe`` is answered, later ticks in ``later``; ``kept``: a ``forward``'s answer names
    the queries kept in ``"kept": [query]``).  Without ``caps``: an older container.

``state`` (container to driver, then driver to the task's new container)
    ``{"container", "query", "dst", "seq", "error"}`` then the snapshot's frames
    (:func:`linkstream.operators.state.encode_state`: msgpack header + raw int64
    buffers), kept opaque here.  ``container`` is the source; no frames and an
    ``error`` mean the source could not snapshot and the target must rebuild.

Decoding never trusts its input: anything malformed raises :class:`ProtocolError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import accumulate, compress, repeat
from typing import Any

import msgpack

from linkstream.containers.messages import (
    Elements,
    Failed,
    Forward,
    Handover,
    Hello,
    Message,
    Owned,
    Ready,
    Recompute,
    Recomputed,
    Result,
    State,
    Subscribe,
    Tick,
    Unready,
)
from linkstream.containers.protofields import VERSION as VERSION  # (the message version: tests read it here)
from linkstream.containers.protofields import (
    ProtocolError,
    as_i8,
    check_frames,
    counts_field,
    int64_frame,
    int_field,
    ints_field,
    later_field,
    pack_header,
    read_header,
    str_field,
    str_map_field,
    strs_field,
    view,
)
from linkstream.containers.wire import Frame
from linkstream.engine.render import JoinedLines, joined_text

#: the lines of a query without any (shared: a tick names thousands of queries)
_NONE: Sequence[str] = ()


# ----------------------------------------------------------------------------- encoding


def _bulk(message: Elements, header: dict[str, Any]) -> list[Frame]:
    """``header`` (with the sizes added) and the four bulk frames of ``message``."""
    meta = as_i8(message.meta).reshape(3, -1)
    triples = as_i8(message.triples).reshape(-1, 3)
    ids = as_i8(message.ids).reshape(-1)
    if len(ids) != len(message.terms):
        raise ProtocolError(f"{len(ids)} ids for {len(message.terms)} terms")
    header.update(nt=len(message.terms), k=meta.shape[1], n=triples.shape[0])
    terms = msgpack.packb(list(message.terms), use_bin_type=True)
    return [
        pack_header(header),
        terms,
        # ``a.data`` is ``memoryview(a)`` (numpy types the buffer protocol only for Python >= 3.12)
        ids.data,
        meta.reshape(-1).data,
        triples.reshape(-1).data,
    ]


def _lines_frames(header: dict[str, Any], lines: Mapping[str, Sequence[str]]) -> list[Frame]:
    names = list(lines)
    texts = [joined_text(lines[n]) for n in names]
    whole = "".join(texts)
    data = whole.encode("utf-8")
    header["names"] = names
    if len(data) == len(whole):  # ASCII: a block's characters are its bytes
        header["sizes"] = [len(t) for t in texts]
    else:
        header["sizes"] = [len(t.encode("utf-8")) for t in texts]
    header["counts"] = [len(lines[n]) for n in compress(names, texts)]  # (those with a block only)
    return [pack_header(header), data]


def encode(message: Message) -> list[Frame]:
    """Frames of ``message`` (see the module docstring)."""
    if isinstance(message, Elements):
        header: dict[str, Any] = {"kind": "els" if message.sync_tick is None else "sync", "run": message.run}
        if message.sync_tick is not None:
            header.update(
                tick=message.sync_tick, sub=message.version, streams=[int(k) for k in message.streams]
            )
            if message.counts:
                header["counts"] = [int(n) for n in message.counts]
            if message.owners:
                header["owners"] = True
        return _bulk(message, header)
    if isinstance(message, Forward):
        return _forward_frames(message)
    if isinstance(message, Owned):
        meta, triples = as_i8(message.meta).reshape(2, -1), as_i8(message.triples).reshape(-1, 3)
        return [
            pack_header(
                {"kind": "owned", "run": message.run, "stream": message.stream, "first": message.first}
                | {"nt": len(message.terms), "k": meta.shape[1], "n": triples.shape[0]}
            ),
            msgpack.packb(list(message.terms), use_bin_type=True),
            meta.reshape(-1).data,
            triples.reshape(-1).data,
        ]
    if isinstance(message, Recompute):
        if len(message.ticks) != len(message.at):
            raise ProtocolError(f"{len(message.ticks)} ticks for {len(message.at)} positions")
        header = {"kind": "recompute", "run": message.run, "id": message.id}
        header.update(queries=list(message.queries), ticks=list(message.ticks), at=list(message.at))
        header.update({"rebuild": list(message.rebuild)} if message.rebuild else {})
        header.update({"owe": message.owe} if message.owe else {})
        return _bulk(message.elements, header)
    if isinstance(message, Recomputed):
        header = {"kind": "recomputed", "run": message.run, "container": message.container}
        header.update(id=message.id, c=message.c, error=message.error)
        if message.later:  # (small: a few report times of the dead container's queries)
            header["later"] = [[c, {n: "\n".join(x) for n, x in v.items()}] for c, v in message.later.items()]
        header.update({"caps": list(message.caps)} if message.caps else {})
        header.update({"kept": list(message.kept)} if message.kept is not None else {})
        return _lines_frames(header, message.lines)
    if isinstance(message, Tick):
        tick = {
            "kind": "tick",
            "run": message.run,
            "seq": message.seq,
            "c": message.c,
            "due": list(message.due),
            "owners": dict(message.owners),
            "rel": dict(message.rel),
        }
        if message.cuts:  # --ingest direct only: a tick without cuts is the bytes it always was
            tick["cuts"] = dict(message.cuts)
        return [pack_header(tick)]
    if isinstance(message, Hello):
        return [
            pack_header(
                {
                    "kind": "hello",
                    "run": message.run,
                    "container": message.container,
                    "address": message.address,
                }
                | ({"caps": list(message.caps)} if message.caps else {})
            )
        ]
    if isinstance(message, Subscribe):
        body = {"container": message.container, "sub": message.version, "streams": list(message.streams)}
        return [pack_header({"kind": "subscribe", "run": message.run, **body})]
    if isinstance(message, Ready):
        body = {"container": message.container, "query": message.query, "from": message.first_tick}
        return [pack_header({"kind": "ready", "run": message.run, **body})]
    if isinstance(message, Unready):
        body = {"container": message.container, "query": message.query, "token": message.token}
        return [pack_header({"kind": "unready", "run": message.run, **body})]
    if isinstance(message, Result):
        header = {
            "kind": "result",
            "run": message.run,
            "container": message.container,
            "seq": message.seq,
            "c": message.c,
            "missing": list(message.missing),
        }
        if message.first:  # (a key only when set: the result of a tick is the bytes it was)
            header["from"] = dict(message.first)
        return _lines_frames(header, message.lines)
    if isinstance(message, Failed):
        body = {"container": message.container, "query": message.query, "error": message.error}
        return [pack_header({"kind": "failed", "run": message.run, **body})]
    if isinstance(message, Handover):
        body = {"query": message.query, "dst": message.dst, "seq": message.seq}
        return [pack_header({"kind": "handover", "run": message.run, **body})]
    if isinstance(message, State):
        body = {"container": message.container, "query": message.query, "dst": message.dst}
        body.update(seq=message.seq, error=message.error)
        return [pack_header({"kind": "state", "run": message.run, **body}), *message.frames]
    raise ProtocolError(f"not a protocol message: {type(message).__name__}")


# ----------------------------------------------------------------------------- decoding


def _sized_terms(
    h: dict[str, Any], frames: Sequence[Frame], count: int, what: str
) -> tuple[int, int, int, list[str]]:
    """``nt, k, n`` of the header and the ``nt`` term strings of frame 1 (``count`` frames)."""
    check_frames(frames, count, h["kind"])
    nt, k, n = int_field(h, "nt", 0), int_field(h, "k", 0), int_field(h, "n", 0)
    try:
        terms = msgpack.unpackb(view(frames[1]), raw=False)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise ProtocolError(f"{what} is not valid msgpack: {exc}") from exc
    if type(terms) is not list or len(terms) != nt or not all(type(t) is str for t in terms):
        raise ProtocolError(f"{what} must be a list of nt strings")
    return nt, k, n, terms


def _elements(h: dict[str, Any], frames: Sequence[Frame]) -> Elements:
    nt, k, n, terms = _sized_terms(h, frames, 5, "dictionary delta")
    ids = int64_frame(frames[2], nt, "term ids")
    if nt and int(ids.min()) <= 0:
        raise ProtocolError("term ids must be positive")
    meta = int64_frame(frames[3], 3 * k, "element table").reshape(3, k)
    triples = int64_frame(frames[4], 3 * n, "triples").reshape(n, 3)
    if k and (int(meta[2].min()) < 0 or int(meta[2].sum()) != n):
        raise ProtocolError("element sizes do not add up to the triples sent")
    if h["kind"] == "sync":
        streams = ints_field(h, "streams")
        counts = counts_field(h, "counts") if "counts" in h else ()
        if counts and len(counts) != len(streams):
            raise ProtocolError("sync: counts must hold one count per stream")
        tick, sub, owners = int_field(h, "tick", 0), int_field(h, "sub", 0), h.get("owners") is True
        return Elements(str_field(h, "run"), ids, terms, meta, triples, tick, streams, sub, counts, owners)
    return Elements(str_field(h, "run"), ids, terms, meta, triples)


def _owned(h: dict[str, Any], frames: Sequence[Frame]) -> Owned:
    nt, k, n, terms = _sized_terms(h, frames, 4, "owned: terms")
    meta = int64_frame(frames[2], 2 * k, "element table").reshape(2, k)
    triples = int64_frame(frames[3], 3 * n, "triples").reshape(n, 3)
    if k and (int(meta[1].min()) < 0 or int(meta[1].sum()) != n):
        raise ProtocolError("owned: element sizes do not add up to the triples sent")
    if n and (int(triples.min()) < 0 or int(triples.max()) >= nt):
        raise ProtocolError("owned: a triple names a term outside the terms sent")
    return Owned(str_field(h, "run"), str_field(h, "stream"), int_field(h, "first", 0), terms, meta, triples)


def _lines(h: dict[str, Any], frames: Sequence[Frame]) -> dict[str, Sequence[str]]:
    """The lines of each query: one frame holds every query's block, ``sizes`` their byte
    lengths in ``names`` order (one frame, not one per query: a tick of thousands of
    queries is one ZeroMQ part and one UTF-8 decode); each query's lines come as a
    :class:`~linkstream.engine.render.JoinedLines` (its block, split when read)."""
    kind = h["kind"]
    names = strs_field(h, "names")
    sizes = h.get("sizes")
    if (
        type(sizes) is not list
        or len(sizes) != len(names)
        or (sizes and (set(map(type, sizes)) != {int} or min(sizes) < 0 or max(sizes) >= 2**63))
    ):  # (checked at C speed: a tick names thousands of queries)
        raise ProtocolError(f"{kind}: sizes must hold one byte count >= 0 per name")
    check_frames(frames, 2, kind)
    data = view(frames[1])  # (decoded from the frame's buffer: no copy into a bytes first)
    if sum(sizes) != len(data):
        raise ProtocolError(f"{kind}: the lines frame holds {len(data)} bytes, sizes say {sum(sizes)}")
    try:
        text = str(data, "utf-8")
    except UnicodeDecodeError as exc:
        at, a = exc.start, 0
        for name, n in zip(names, sizes):
            if at < a + n:
                raise ProtocolError(f"result lines of {name!r} are not UTF-8") from exc
            a += n
        raise ProtocolError(f"{kind}: result lines are not UTF-8") from exc
    # each query's block stays one text (split when read: JoinedLines); thousands of
    # blocks per tick, millions of lines the leader mostly never reads one by one
    # (most queries report nothing at a tick: they share one empty tuple, set at C speed, and
    # only the reports with lines take a Python step)
    lines: dict[str, Sequence[str]] = dict.fromkeys(names, _NONE)
    ends = list(accumulate(sizes))
    ascii_ = len(text) == len(data)  # (JSON lines escape the rest): byte offsets are indexes
    # the line counts of the blocks (a container that predates them sends none: counted when read)
    counts = h.get("counts")
    lined = list(compress(range(len(names)), sizes))
    if (
        type(counts) is not list
        or len(counts) != len(lined)
        or (counts and (set(map(type, counts)) != {int} or min(counts) <= 0))
    ):
        counts = [None] * len(lined)
    if len(lines) != len(names):  # a name twice (no container sends that): the last one's report
        for name, n, b in zip(names, sizes, ends):
            lines[name] = (
                (JoinedLines(text[b - n : b] if ascii_ else str(data[b - n : b], "utf-8"))) if n else _NONE
            )
        return lines
    # the blocks cut at C speed (slices of the text, or of the bytes when not ASCII): the one
    # Python step per report with lines is its JoinedLines
    starts = [0, *ends[:-1]]
    cuts = map(slice, map(starts.__getitem__, lined), map(ends.__getitem__, lined))
    blocks = map(text.__getitem__, cuts) if ascii_ else map(str, map(data.__getitem__, cuts), repeat("utf-8"))
    lines.update(zip(map(names.__getitem__, lined), map(JoinedLines, blocks, counts)))
    return lines


def _recompute(h: dict[str, Any], frames: Sequence[Frame]) -> Recompute:
    els = _elements(h, frames)
    ticks, at = h.get("ticks"), h.get("at")
    if type(ticks) is not list or not all(type(c) is int and -(2**63) <= c < 2**63 for c in ticks):
        raise ProtocolError("recompute: ticks must be a list of ints")
    if type(at) is not list or len(at) != len(ticks) or not ticks:
        raise ProtocolError("recompute: at must hold one position per tick (at least one)")
    k = els.meta.shape[1]
    prev = 0
    for i, x in enumerate(at):
        if type(x) is not int or not prev <= x <= k or (i and ticks[i] <= ticks[i - 1]):
            raise ProtocolError("recompute: ticks must increase and positions stay within the elements")
        prev = x
    rebuild = strs_field(h, "rebuild") if "rebuild" in h else []
    if (owe := int_field(h, "owe") if "owe" in h else 0) and owe not in ticks:
        raise ProtocolError("recompute: the owed report time must be one of the ticks")
    return Recompute(els.run, int_field(h, "id", 0), strs_field(h, "queries"), ticks, at, els, rebuild, owe)


def decode(frames: Sequence[Frame]) -> Message:
    """Parses one multipart message; array data are read-only views of the frames.

    Raises:
        ProtocolError: Anything about the message is malformed.
    """
    h = read_header(frames)
    kind = h.get("kind")
    if kind in ("els", "sync"):
        return _elements(h, frames)
    if kind == "recompute":
        return _recompute(h, frames)
    if kind == "forward":
        return _forward(h, frames)
    if kind == "owned":
        return _owned(h, frames)
    run = str_field(h, "run")
    if kind == "tick":
        check_frames(frames, 1, kind)
        return Tick(
            run,
            int_field(h, "seq", 1),
            int_field(h, "c"),
            strs_field(h, "due"),
            str_map_field(h, "owners", str),
            str_map_field(h, "rel", int),
            str_map_field(h, "cuts", int) if "cuts" in h else {},
        )
    if kind == "hello":
        check_frames(frames, 1, kind)
        caps = tuple(strs_field(h, "caps")) if "caps" in h else ()
        return Hello(run, str_field(h, "container"), str_field(h, "address"), caps)
    if kind == "subscribe":
        check_frames(frames, 1, kind)
        return Subscribe(run, str_field(h, "container"), int_field(h, "sub", 1), ints_field(h, "streams"))
    if kind == "ready":
        check_frames(frames, 1, kind)
        return Ready(run, str_field(h, "container"), str_field(h, "query"), int_field(h, "from", 1))
    if kind == "unready":
        check_frames(frames, 1, kind)
        return Unready(run, str_field(h, "container"), str_field(h, "query"), int_field(h, "token", 1))
    if kind == "result":
        lines = _lines(h, frames)
        return Result(
            run,
            str_field(h, "container"),
            int_field(h, "seq", 1),
            int_field(h, "c"),
            lines,
            strs_field(h, "missing"),
            str_map_field(h, "from", int) if "from" in h else {},
        )
    if kind == "recomputed":
        args = (run, str_field(h, "container"), int_field(h, "id", 0), int_field(h, "c"), _lines(h, frames))
        caps = tuple(strs_field(h, "caps")) if "caps" in h else ()
        kept = tuple(strs_field(h, "kept")) if "kept" in h else None
        return Recomputed(*args, str_field(h, "error"), later_field(h), caps, kept)
    if kind == "failed":
        check_frames(frames, 1, kind)
        return Failed(run, str_field(h, "container"), str_field(h, "query"), str_field(h, "error"))
    if kind == "handover":
        check_frames(frames, 1, kind)
        return Handover(run, str_field(h, "query"), str_field(h, "dst"), int_field(h, "seq", 0))
    if kind == "state":
        return State(
            run,
            str_field(h, "container"),
            str_field(h, "query"),
            str_field(h, "dst"),
            int_field(h, "seq", 0),
            list(frames[1:]),
            str_field(h, "error"),
        )
    raise ProtocolError(f"unknown message kind {kind!r}")


# ----------------------------------------------------------------------------- forward


def _forward_frames(message: Forward) -> list[Frame]:
    if len(message.ticks) != len(message.at) or len(message.ticks) < 2:
        raise ProtocolError("forward: one position per report time, at least two report times")
    header: dict[str, Any] = {"kind": "forward", "run": message.run, "id": message.id}
    header.update(queries=list(message.queries), ticks=list(message.ticks), at=list(message.at))
    objects = {n: {k: message.objects[n][k] for k in ("key", "size", "sha256")} for n in message.objects}
    header.update(uri=message.uri, objects=objects, owe=message.owe or message.ticks[-1])
    return _bulk(message.elements, header)


def _forward(h: dict[str, Any], frames: Sequence[Frame]) -> Forward:
    base = _recompute(h, frames)
    if len(base.ticks) < 2:
        raise ProtocolError("forward: at least the checkpoint's and the owed report time")
    objects = h.get("objects")
    if type(objects) is not dict:
        raise ProtocolError("forward: objects must be a map")
    for name, entry in objects.items():
        if (
            type(name) is not str
            or type(entry) is not dict
            or type(entry.get("key")) is not str
            or type(entry.get("size")) is not int
            or type(entry.get("sha256")) is not str
        ):
            raise ProtocolError("forward: an object must be {key: str, size: int, sha256: str}")
    if (owe := base.owe) not in base.ticks[1:]:
        raise ProtocolError("forward: the owed report time must be one of those fed forward")
    args = (base.run, base.id, base.queries, base.ticks, base.at, base.elements)
    return Forward(*args, uri=str_field(h, "uri"), objects=objects, owe=owe)
