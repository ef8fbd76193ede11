"""What a ``linkstream replay`` process loads: a structural guard of its start-up cost.

Start-up is most of a short replay's CPU time (bench/startup.py, bench/citybench.py): the
modules it imports and what they do when imported.  This test runs one replay in a fresh
process and checks, without timing anything:

* no module of the package compiles a regular expression when it is imported (they compile
  on first use: ``linkstream.rdf.lazyre``);
* no class of the package but the few listed in :data:`DATACLASSES` is a ``@dataclass`` that
  generates its methods (Python 3.11 compiles each with ``exec``: ~0.5 ms a class); the others
  are ``linkstream.rdf.records.record`` classes;
* the replay imports none of the server, cluster, metrics or Spark stacks, nor the library of
  SPARQL built-in functions when its query calls none;
* the replay's results are those of the same query in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from linkstream.cli import main as cli_main
from tests.query.test_parse_store import EX, STREAM, write_inputs

QUERY = """REGISTER QUERY q AS
PREFIX ex: <http://example.org/>
SELECT ?s ?v
FROM <http://example.org/g>
FROM STREAM <http://example.org/s> [RANGE 3s STEP 1s]
WHERE { ?s ex:p ?v FILTER(?v > 2) ?s ex:q ?o }
"""

#: modules a replay whose query calls no built-in function must not import
NOT_IMPORTED = (
    "linkstream.api",
    "linkstream.cluster",
    "linkstream.containers",
    "linkstream.metrics",
    "linkstream.query.functions.builtins",
    "linkstream.query.functions.strings",
    "prometheus_client",
    "zmq",
    "httpx",
    "kazoo",
    "uvicorn",
    "starlette",
    "pyspark",
    "linkstream.bulk",
    "linkstream.scheduler",
    "linkstream.rdma",
    "linkstream.engine.live",
    "linkstream.cli.service",
    "linkstream.cli.cluster",
    "linkstream.cli.sparql",
    "lmdb",
    "asyncio",
)

#: the dataclasses a replay may create with generated methods (config may not import rdf;
#: the router's is another engineer's module); any other is a ``linkstream.rdf.records.record``
DATACLASSES = {
    "linkstream.operators.router_groups.Group",
    "linkstream.config.ApiConfig",
    "linkstream.config.ClusterConfig",
    "linkstream.config.CheckpointConfig",
    "linkstream.config.SparkConfig",
    "linkstream.config.QueryConfig",
    "linkstream.config.Config",
}

PROBE = """
import dataclasses, json, os, re, sys
package = sys.argv[1] + os.sep
compiled = []
original = re._compile
generated = []
dataclass = dataclasses.dataclass

def counted(cls=None, /, **kw):
    def wrap(c):
        if kw.get("init", True) or kw.get("repr", True) or kw.get("eq", True):
            generated.append(f"{c.__module__}.{c.__qualname__}")
        return dataclass(c, **kw)
    return wrap if cls is None else wrap(cls)

dataclasses.dataclass = counted

def record(pattern, flags):
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == re.__file__:
        frame = frame.f_back
    if frame is not None and frame.f_code.co_filename.startswith(package):
        compiled.append(f"{frame.f_code.co_filename}:{frame.f_lineno}")
    return original(pattern, flags)

re._compile = record
from linkstream.cli import main
from linkstream.engine import embedded, replay
from linkstream.query import continuous
from linkstream.rdf import dictionary, static
re._compile = original
rc = main(sys.argv[2:])
print(json.dumps({"rc": rc, "compiled": compiled, "generated": generated, "modules": sorted(sys.modules)}))
"""


def test_a_replay_loads_only_what_it_needs(tmp_path: Path) -> None:
    import linkstream.engine.embedded as embedded

    stream, static = write_inputs(tmp_path)  # (the parse cache test's stream and graph)
    query = tmp_path / "q.rq"
    query.write_text(QUERY)
    args = ["replay", "--query", str(query), "--stream", f"{STREAM}={stream}", "--static", f"{EX}g={static}"]

    package, a, b = str(Path(embedded.__file__).parents[1]), tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    p = subprocess.run(
        [sys.executable, "-c", PROBE, package, *args, "--quiet", "--out", str(a)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LINKSTREAM_QUERY_PARSE_CACHE": "off"},  # (no user's cache written)
    )
    assert p.returncode == 0, p.stderr
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    assert seen["rc"] == 0
    assert "linkstream.query.functions.scalar" in seen["modules"]  # (the FILTER's evaluator)
    assert seen["compiled"] == [], "compiled at import (use linkstream.rdf.lazyre.lazy): " + ", ".join(
        seen["compiled"]
    )
    assert "linkstream.operators.batch.Batch" not in seen["generated"]  # (a record: not counted)
    made = [c for c in seen["generated"] if c.startswith("linkstream.") and c not in DATACLASSES]
    assert made == [], "use linkstream.rdf.records.record for " + ", ".join(made)
    loaded = [m for m in seen["modules"] if m.split(".")[0] in {n.split(".")[0] for n in NOT_IMPORTED}]
    assert not [m for m in loaded if any(m == n or m.startswith(n + ".") for n in NOT_IMPORTED)], loaded
    # the results: those of the same replay in this process
    assert cli_main([*args, "--quiet", "--out", str(b)]) == 0
    lines = a.read_text().splitlines()
    assert lines and lines == b.read_text().splitlines()
    assert all(json.loads(line)["query"] == "q" for line in lines)
