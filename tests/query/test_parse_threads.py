"""Queries parsed by many threads at once, first thing in a process, all parse.

rdflib's SPARQL grammar is pyparsing, which is not thread-safe: a parse action's arity is
found by trial on its first calls, and threads calling it first at once fixed a wrong one
for the process's life.  Every later parse then failed with "Param.postParse2() missing 1
required positional argument: 'tokenList'".  A standby coordinator that became leader while
a thousand result readers asked it for their queries' views hit this (CI, session 12): it
could not restore a single query for two minutes.  ``query.rules.PARSE_LOCK`` serialises
the parses; before it, 32 of 32 threads failed here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = r"""
import json, sys, threading
from linkstream.query.continuous import parse_continuous
n = 32
good = [
    "PREFIX ex: <http://example.org/>\n"
    f"SELECT ?s ?o (COUNT(?x) AS ?n) WHERE {{ STREAM ex:s{k} [RANGE 10s SLIDE 1s] "
    f"{{ ?s ex:p{k} ?o . ?s ex:q ?x FILTER(?o > {k}) }} OPTIONAL {{ ?s ex:r \"v{k}\"@en }} }} GROUP BY ?s ?o"
    for k in range(n)
]
bad = "PREFIX ex: <http://example.org/>\nSELECT ?s WHERE { STREAM ex:s [RANGE 10s SLIDE 1s] { ?s ex:p } }"
texts = good + [bad] * 4
out = [None] * len(texts)
barrier = threading.Barrier(len(texts))
def work(k):
    barrier.wait()
    try:
        parse_continuous(texts[k], default_name=f"q{k}")
        out[k] = "ok"
    except Exception as e:
        out[k] = f"{type(e).__name__}: {e}"
threads = [threading.Thread(target=work, args=(k,)) for k in range(len(texts))]
for t in threads: t.start()
for t in threads: t.join()
try:
    parse_continuous(bad, default_name="alone")
except Exception as e:
    alone = f"{type(e).__name__}: {e}"
print(json.dumps({"good": out[:n], "bad": out[n:], "alone": alone}))
"""


def test_queries_parsed_by_many_threads_at_once_all_parse() -> None:
    env = dict(os.environ, LINKSTREAM_QUERY_PARSE_CACHE="off")  # every thread really parses
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    failed = [r for r in got["good"] if r != "ok"]
    assert failed == [], f"{len(failed)} of {len(got['good'])} failed, e.g. {failed[0]}"
    # a bad query parsed among them is told as it is when parsed alone
    assert got["alone"].startswith("QueryError")
    assert got["bad"] == [got["alone"]] * 4
