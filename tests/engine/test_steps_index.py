"""Replay's units from the engine's steps index (linkstream.engine.units) give the same
reports as units built from the queries given."""

from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.query.continuous import parse_continuous

S = "http://ex/s"
DT = "<http://www.w3.org/2001/XMLSchema#dateTime>"


def _stream(path):
    lines = []
    for i in range(6):
        g = f"<http://ex/g{i}>"
        lines.append(f'{g} <http://www.w3.org/ns/prov#generatedAtTime> "2023-11-14T22:13:2{i}.000Z"^^{DT} .')
        lines.append(f"<http://ex/u{i % 3}> <http://ex/p> <http://ex/o{i}> {g} .")
    path.write_text("\n".join(lines) + "\n")


def _run(tmp_path, subset):
    eng = Engine()
    rqs = [
        eng.register(
            parse_continuous(
                f"SELECT ?p ?o WHERE {{ STREAM <{S}> [RANGE {r}s SLIDE 1s] {{ <http://ex/u{u}> ?p ?o }} }}",
                default_name=f"q{u}_{r}",
            )
        )
        for u in range(3)
        for r in (2, 3)
    ]
    _stream(tmp_path / "s.nq")
    given = rqs[::-1][:4] if subset else rqs
    assert (eng.steps_index.units(given) is None) == subset
    out = []

    class Sink:
        def write(self, s):
            out.append(s)

    res = replay(eng, given, [(S, str(tmp_path / "s.nq"))], Sink())
    return "".join(out), {q.name: (q.stats.reports, q.stats.rows, q.last_report) for q in given}, res


def test_all_registered_and_subset_agree(tmp_path):
    text_all, stats_all, res = _run(tmp_path, subset=False)
    assert res.rows > 0 and set(res.queries) == set(stats_all)
    text_sub, stats_sub, _ = _run(tmp_path, subset=True)
    kept = [ln for ln in text_all.splitlines(keepends=True) if any(f'"{n}"' in ln for n in stats_sub)]
    assert text_sub == "".join(kept)
    assert stats_sub == {n: stats_all[n] for n in stats_sub}
    assert all(r > 0 for r, _, _ in stats_all.values())
