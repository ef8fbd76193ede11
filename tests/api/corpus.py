"""The CityBench slice the API tests push: stream files for ``linkstream replay`` and the
same elements as request bodies."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from linkstream.api.app import create_app
from linkstream.api.limits import ApiLimits
from linkstream.api.server import BackgroundServer, build_live
from linkstream.rdf.ntriples import parser_for
from linkstream.rdf.streams import PROV_GENERATED_AT, parse_datetime_ms
from linkstream.rdf.terms import unescape_string

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()
SES = "http://www.insight-centre.org/dataset/SampleEventService#"
STREAM_A = SES + "AarhusTrafficData182955"
STREAM_B = SES + "AarhusTrafficData158505"
REPO_GRAPH = "http://127.0.0.1:9000/WebGlCity/RDF/SensorRepository.rdf"
ELEMENTS = 30  # per stream


@dataclass
class Element:
    """One stream element of the slice, ready to push."""

    stream: str
    t: int
    nquads: str  # the element as timestamped N-Quads (SEMANTICS.md §2)
    ntriples: str  # its triples as N-Triples (the timestamp given separately)


@dataclass
class Corpus:
    """The slice: files for ``linkstream replay`` and the same elements for pushing."""

    static: Path
    streams: dict[str, Path]
    queries: Path
    elements: list[Element] = field(default_factory=list)  # merged by time, as a replay reads them

    def static_args(self) -> list[str]:
        """The ``--static`` options of every run over the slice (default and named graph)."""
        return ["--static", str(self.static), "--static", f"{REPO_GRAPH}={self.static}"]

    def replay_args(self) -> list[str]:
        args = self.static_args()
        for iri, path in self.streams.items():
            args += ["--stream", f"{iri}={path}"]
        return args

    def texts(self, names: list[str]) -> dict[str, str]:
        """The text of each named query of ``examples/citybench/queries``."""
        return {q: (self.queries / f"{q}.rq").read_text(encoding="utf-8") for q in names}

    def embedded_server(self, limits: ApiLimits | None = None) -> BackgroundServer:
        """An embedded ``run`` over the slice's static graphs, started (the reference the
        cluster's results are compared with), with ``limits`` (the defaults if ``None``);
        the caller stops it."""
        live = build_live([(None, str(self.static)), (REPO_GRAPH, str(self.static))], idle_ms=None)
        return BackgroundServer(
            create_app(live, limits=limits), on_shutdown=live.close, limits=limits
        ).start()

    def last_report(self, step: int = 1000) -> int:
        """The replay's last report time for a query of ``step`` (SEMANTICS.md §4)."""
        t_max = max(el.t for el in self.elements)
        return (t_max // step + 1) * step


def _split_elements(stream: str, text: str) -> list[Element]:
    parser = parser_for("")
    out: list[Element] = []
    nq: list[str] = []
    nt: list[str] = []
    for line in text.splitlines():
        q = parser.parse_line(line)
        if q is None:
            continue
        s, p, o, g = q
        if g is None and p == "<" + PROV_GENERATED_AT + ">":
            if nq:
                out[-1].nquads, out[-1].ntriples = "".join(nq), "".join(nt)
            lex = o[1 : o.index('"^^')]
            out.append(Element(stream, parse_datetime_ms(unescape_string(lex)), "", ""))
            nq, nt = [], []
        else:
            nt.append(f"{s} {p} {o} .\n")
        nq.append(line + "\n")
    if nq:
        out[-1].nquads, out[-1].ntriples = "".join(nq), "".join(nt)
    return out


def corpus_or_skip(out: Path) -> Corpus:
    """:func:`build_corpus` from the shared corpus (``$LINKSTREAM_SHARED`` or
    ``../shared``), the test skipped when no CityBench data is found."""
    corpus = build_corpus(SHARED, out)
    if corpus is None:
        pytest.skip("no CityBench data")
    return corpus


def build_corpus(shared: Path, out: Path) -> Corpus | None:
    """The first ``ELEMENTS`` elements of two traffic streams (from ``shared`` or the
    repository's examples), written to ``out``; ``None`` if neither has the data."""
    if (shared / "citybench" / "streams").is_dir():
        src = shared / "citybench" / "streams"
        static = shared / "citybench" / "static" / "SensorRepository.nt"
    elif (REPO / "examples" / "citybench" / "streams").is_dir():
        src = REPO / "examples" / "citybench" / "streams"
        static = REPO / "examples" / "citybench" / "static" / "SensorRepository-slice.nt"
    else:
        return None
    corpus = Corpus(static, {}, REPO / "examples" / "citybench" / "queries")
    for iri in (STREAM_A, STREAM_B):
        stem = iri.rsplit("#", 1)[1]
        lines, n = [], 0
        with open(src / f"{stem}.nq", encoding="utf-8") as f:
            for line in f:
                if "generatedAtTime" in line:
                    n += 1
                    if n > ELEMENTS:
                        break
                lines.append(line)
        path = out / f"{stem}.nq"
        path.write_text("".join(lines), encoding="utf-8")
        corpus.streams[iri] = path
        corpus.elements += _split_elements(iri, "".join(lines))
    corpus.elements.sort(key=lambda el: el.t)  # stable: file order within a stream
    return corpus
