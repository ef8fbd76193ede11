"""A corpus of bad values for every flag of every ``linkstream`` subcommand.

Each row runs the real ``main(argv)`` in-process and asserts the exact outcome: the exit
status (2: usage, 1: runtime failure) and one line on stderr, ``error: ...``, naming the
flag or file at fault; never a traceback, never a hang (every bad value is refused before
a ZooKeeper, a port or a file is touched).  Rows whose input is valid assert that it is
accepted.  A few cases run through a real subprocess as well.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from linkstream.cli import main as cli_main

STREAM = (
    '<http://ex.org/g1> <http://www.w3.org/ns/prov#generatedAtTime> "2024-01-01T00:00:01Z"'
    "^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n"
    '<http://ex.org/a> <http://ex.org/p> "1" <http://ex.org/g1> .\n'
)
QUERY = "SELECT ?o WHERE { STREAM <http://ex.org/s> [RANGE 3s] { ?x ?p ?o } }"
NOZK = "127.0.0.1:9"  # nothing listens: a case that reached ZooKeeper would hang for 30 s


@pytest.fixture(scope="module")
def d(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a query, a stream, a static graph, a store and a zk credential."""
    root = tmp_path_factory.mktemp("cli")
    (root / "q.rq").write_text(QUERY)
    (root / "s.nq").write_text(STREAM)
    (root / "g.nt").write_text('<http://ex.org/s1> <http://ex.org/p> "1" .\n')
    (root / "bin.rq").write_bytes(b"SELECT \xff\xfe")
    (root / "dir").mkdir()
    (root / "nts").mkdir()
    (root / "nts" / "h.nt").write_text('<http://ex.org/s2> <http://ex.org/p> "2" .\n')
    assert cli_main(["load", "--store", str(root / "store"), "--quiet", str(root / "g.nt")]) == 0
    return root


@dataclass
class Case:
    """``argv`` (``{d}`` is the fixture folder) must end with ``code`` and ``says`` on stderr."""

    id: str
    argv: str
    code: int
    says: str


R = "replay --query {d}/q.rq --stream http://ex.org/s={d}/s.nq --out {d}/out.jsonl --quiet"
C = f"container --zk {NOZK} --insecure"
CO = f"coordinator --zk {NOZK} --insecure"
AS = f"autoscaler --zk {NOZK} --insecure --autoscale 1:2"
RUN = "run --port 0 --token secret-0123456789"

# fmt: off
CASES: list[Case] = [
    # ------------------------------------------------------------ top level
    Case("no-command", "", 1, ""),
    Case("unknown-command", "frobnicate", 2, "argument COMMAND: invalid choice: 'frobnicate'"),
    # ------------------------------------------------------------ replay
    Case("replay-ok", R, 0, ""),
    Case("replay-no-query", "replay --stream http://ex.org/s={d}/s.nq --out -", 2, "the following arguments are required: --query"),
    Case("replay-no-out", "replay --query {d}/q.rq", 2, "the following arguments are required: --out"),
    Case("replay-unknown-flag", R + " --frobnicate", 2, "unrecognized arguments: --frobnicate"),
    Case("replay-default-step-word", R + " --default-step x", 2, "argument --default-step: invalid int value: 'x'"),
    Case("replay-default-step-zero", R + " --default-step 0", 2, "--default-step must be >= 1, got 0"),
    Case("replay-default-step-negative", R + " --default-step -5", 2, "--default-step must be >= 1, got -5"),
    Case("replay-lateness-negative", R + " --lateness -1", 2, "--lateness must be >= 0, got -1"),
    Case("replay-lateness-fraction", R + " --lateness 1.5", 2, "argument --lateness: invalid int value: '1.5'"),
    Case("replay-max-time-jump-unit", R + " --max-time-jump 1y", 2, "argument --max-time-jump: bad duration '1y'"),
    Case("replay-max-time-jump-negative", R + " --max-time-jump -1", 2, "argument --max-time-jump: bad duration '-1'"),
    Case("replay-max-time-jump-huge", R + " --max-time-jump 99999999999999999999", 2, "is more than 2^53 ms"),
    Case("replay-max-time-jump-zero-ok", R + " --max-time-jump 0", 0, ""),
    Case("replay-base-not-iri", R + " --base 'not a base'", 2, "--base 'not a base' is not an absolute IRI"),
    Case("replay-base-relative", R + " --base foo/", 2, "--base 'foo/' is not an absolute IRI: no scheme in IRI"),
    Case("replay-out-directory", R + " --out {d}/dir", 2, "cannot write --out {d}/dir: Is a directory"),
    Case("replay-out-unwritable", R + " --out /proc/nope/out.jsonl", 2, "cannot write --out /proc/nope/out.jsonl: No such file or directory"),
    Case("replay-stats-directory", R + " --stats {d}/dir", 2, "cannot write --stats {d}/dir: not a writable file"),
    Case("replay-stats-unwritable", R + " --stats /proc/nope/s.json", 2, "cannot write --stats /proc/nope/s.json"),
    Case("replay-dictionary-scheme", R + " --dictionary foo:bar", 2, "cannot open --dictionary foo:bar: unknown dictionary backend 'foo:bar'"),
    Case("replay-dictionary-lmdb-on-file", R + " --dictionary lmdb:{d}/g.nt", 2, "cannot open --dictionary lmdb:{d}/g.nt: "),
    Case("replay-dictionary-hbase-unreachable", R + " --dictionary hbase://127.0.0.1:9/t", 2, "cannot open --dictionary hbase://127.0.0.1:9/t: cannot reach the HBase Thrift gateway at 127.0.0.1:9"),
    Case("replay-dictionary-hbase-no-host", R + " --dictionary hbase://", 2, "HBase dictionary URI needs a host: 'hbase://' (use hbase://HOST:PORT/TABLE)"),
    Case("replay-dictionary-hbase-bad-port", R + " --dictionary hbase://host:notaport/t", 2, "bad port in HBase dictionary URI 'hbase://host:notaport/t'"),
    Case("replay-dictionary-lmdb-no-path", R + " --dictionary lmdb:", 2, "LMDB dictionary URI without a path: 'lmdb:' (use lmdb:PATH)"),
    Case("replay-dictionary-lmdb-new-ok", R + " --dictionary lmdb:{d}/newdict", 0, ""),
    Case("replay-max-reports-negative", R + " --max-reports -1", 2, "--max-reports must be >= 0, got -1"),
    Case("replay-max-reports-zero-ok", R + " --max-reports 0", 0, ""),
    Case("replay-cluster-zero", R + " --cluster 0", 2, "--cluster must be >= 1, got 0"),
    Case("replay-cluster-negative", R + " --cluster -1", 2, "--cluster must be >= 1, got -1"),
    Case("replay-cluster-word", R + " --cluster x", 2, "argument --cluster: invalid int value: 'x'"),
    Case("replay-cluster-and-zk", R + f" --cluster 1 --zk {NOZK}", 2, "argument --zk: not allowed with argument --cluster"),
    Case("replay-placement-choice", R + " --placement foo", 2, "argument --placement: invalid choice: 'foo'"),
    Case("replay-placement-embedded", R + " --placement operators", 2, "--placement operators needs --cluster N or --zk HOST:PORT"),
    Case("replay-parallelism-without-operators", R + " --parallelism 0", 2, "--parallelism needs --placement operators"),
    Case("replay-route-choice", R + " --route nowhere", 2, "argument --route: invalid choice: 'nowhere'"),
    Case("replay-answer-timeout-negative", R + " --answer-timeout -1", 2, "--answer-timeout must be > 0, got -1"),
    Case("replay-answer-timeout-nan", R + " --answer-timeout nan", 2, "--answer-timeout must be a finite number, got nan"),
    Case("replay-answer-timeout-inf", R + " --answer-timeout inf", 2, "--answer-timeout must be a finite number, got inf"),
    Case("replay-zk-auth-file-embedded", R + " --zk-auth-file /no/such", 2, "--zk-auth-file needs --cluster N or --zk HOST:PORT"),
    Case("replay-query-missing", "replay --query /no/q.rq --stream http://ex.org/s={d}/s.nq --out -", 2, "cannot read query /no/q.rq: [Errno 2] No such file or directory"),
    Case("replay-query-directory", "replay --query {d}/dir --stream http://ex.org/s={d}/s.nq --out -", 2, "cannot read query {d}/dir: [Errno 21] Is a directory"),
    Case("replay-query-not-utf8", "replay --query {d}/bin.rq --stream http://ex.org/s={d}/s.nq --out -", 2, "cannot read query {d}/bin.rq: 'utf-8' codec can't decode byte 0xff"),
    Case("replay-query-twice", R + " --query {d}/q.rq", 2, "{d}/q.rq: a query named 'q' is already registered"),
    Case("replay-stream-without-iri", "replay --query {d}/q.rq --stream {d}/s.nq --out -", 2, "--stream needs IRI=PATH, got '{d}/s.nq'"),
    Case("replay-stream-missing", "replay --query {d}/q.rq --stream http://ex.org/s=/no/s.nq --out -", 2, "stream file '/no/s.nq' does not exist"),
    Case("replay-stream-directory", "replay --query {d}/q.rq --stream http://ex.org/s={d}/dir --out -", 2, "stream file '{d}/dir' is a directory"),
    Case("replay-stream-twice", R + " --stream http://ex.org/s={d}/s.nq", 2, "--stream <http://ex.org/s> is given twice ({d}/s.nq and {d}/s.nq)"),
    Case("replay-stream-bad-iri", "replay --query {d}/q.rq --stream '<http://ex .org/s>={d}/s.nq' --out -", 2, "--stream '<http://ex .org/s>={d}/s.nq': invalid IRI code point ' '"),
    Case("replay-stream-relative-iri-ok", "replay --query {d}/q.rq --stream s={d}/s.nq --out {d}/out.jsonl --quiet --base http://ex.org/", 0, ""),
    Case("replay-static-missing", R + " --static /no/g.nt", 2, "static graph file '/no/g.nt' does not exist"),
    Case("replay-static-directory", R + " --static {d}/dir", 2, "static graph file {d}/dir: '{d}/dir' is a directory, not an RDF file"),
    Case("replay-static-unknown-format", R + " --static {d}/q.rq", 2, "static graph file {d}/q.rq: unknown RDF format for '{d}/q.rq'"),
    Case("replay-static-named-ok", R + " --static http://ex.org/g={d}/g.nt", 0, ""),
    Case("replay-store-missing", R + " --store /no/store", 2, "cannot open --store /no/store: not a LinkStream store (no store.json): /no/store"),
    Case("replay-store-not-a-store", R + " --store {d}/dir", 2, "cannot open --store {d}/dir: not a LinkStream store (no store.json)"),
    Case("replay-store-and-dictionary", R + " --store {d}/store --dictionary lmdb:/tmp/x", 2, "--store uses the store's own dictionary; do not also give --dictionary"),
    Case("replay-store-and-cluster", R + " --store {d}/store --cluster 1", 2, "--store works for embedded replays; cluster containers load --static files"),
    # ------------------------------------------------------------ load
    Case("load-no-inputs", "load --store {d}/new1", 2, "the following arguments are required: FILE.nt|.nq|DIR"),
    Case("load-no-store", "load {d}/g.nt", 2, "the following arguments are required: --store"),
    Case("load-input-missing", "load --store {d}/new2 /no/such.nt", 2, "no such file or directory: /no/such.nt"),
    Case("load-partitions-zero", "load --store {d}/new3 --partitions 0 {d}/g.nt", 2, "--partitions must be >= 1, got 0"),
    Case("load-partitions-word", "load --store {d}/new4 --partitions x {d}/g.nt", 2, "argument --partitions: invalid int value: 'x'"),
    Case("load-store-exists", "load --store {d}/store {d}/g.nt", 2, "{d}/store already holds a store (use overwrite)"),
    Case("load-unknown-format", "load --store {d}/new5 {d}/q.rq", 2, "unknown RDF format for '{d}/q.rq'"),
    Case("load-same-file-twice", "load --store {d}/new7 {d}/g.nt {d}/g.nt", 2, "{d}/g.nt: named twice in the inputs; give each file once"),
    Case("load-file-and-its-folder", "load --store {d}/new8 {d}/nts {d}/nts/../nts/h.nt", 2, "{d}/nts/../nts/h.nt: named twice in the inputs (also as {d}/nts/h.nt); give each file once"),
    Case("load-same-file-twice-spark", "load --store {d}/new9 --spark local[1] {d}/g.nt {d}/g.nt", 2, "{d}/g.nt: named twice in the inputs; give each file once"),
    Case("load-dictionary-scheme", "load --store {d}/new6 --dictionary foo:x {d}/g.nt", 2, "unknown dictionary backend 'foo:x'"),
    Case("load-store-unwritable", "load --store /proc/nope/st {d}/g.nt", 2, "No such file or directory: '/proc/nope'"),
    # ------------------------------------------------------------ sparql
    Case("sparql-ok", "sparql --store {d}/store 'ASK { ?s ?p ?o }'", 0, ""),
    Case("sparql-no-store", "sparql 'ASK {}'", 2, "one of the arguments --store --zk is required"),
    Case("sparql-store-missing", "sparql --store /no/store 'ASK {}'", 2, "not a LinkStream store (no store.json): /no/store"),
    Case("sparql-store-not-a-store", "sparql --store {d}/dir 'ASK {}'", 2, "not a LinkStream store (no store.json): {d}/dir"),
    Case("sparql-syntax", "sparql --store {d}/store 'SELECT * WHERE {?s ?p ?o'", 2, "query:1:16: '{' is never closed"),
    Case("sparql-format-choice", "sparql --store {d}/store --format xml 'ASK {}'", 2, "argument --format: invalid choice: 'xml'"),
    Case("sparql-update", "sparql --store {d}/store 'INSERT DATA { <http://a> <http://b> <http://c> }'", 2, "query:1:1: expected SELECT, ASK, CONSTRUCT or DESCRIBE"),
    Case("sparql-stream-window", "sparql --store {d}/store 'SELECT * WHERE { STREAM <http://x> [RANGE 1s] {?s ?p ?o}}'", 2, "a one-shot query cannot read stream windows"),
    Case("sparql-describe", "sparql --store {d}/store 'DESCRIBE <http://ex.org/s1>'", 2, "query: DESCRIBE is not supported"),
    Case("sparql-default-graph-uri-bad", "sparql --store {d}/store --default-graph-uri 'not an iri' 'ASK {}'", 2, "--default-graph-uri 'not an iri': invalid IRI code point ' '"),
    Case("sparql-named-graph-uri-relative", "sparql --store {d}/store --named-graph-uri g 'ASK {}'", 2, "--named-graph-uri 'g': no scheme in IRI <g>"),
    Case("sparql-base-bad", "sparql --store {d}/store --base :: 'ASK {}'", 2, "--base '::' is not an absolute IRI"),
    Case("sparql-query-directory", "sparql --store {d}/store {d}/dir", 2, "{d}/dir is a directory, not a query or a query file"),
    Case("sparql-query-file-not-utf8", "sparql --store {d}/store {d}/bin.rq", 2, "{d}/bin.rq:1:8: "),
    # ------------------------------------------------------------ store verify
    Case("store-no-command", "store", 2, "the following arguments are required: COMMAND"),
    Case("store-verify-ok", "store verify {d}/store", 0, ""),
    Case("store-verify-missing", "store verify /no/store", 2, "not a LinkStream store (no store.json): /no/store"),
    Case("store-verify-not-a-store", "store verify {d}/dir", 2, "not a LinkStream store (no store.json): {d}/dir"),
    Case("store-verify-unknown-command", "store repair {d}/store", 2, "argument COMMAND: invalid choice: 'repair'"),
    # ------------------------------------------------------------ demo
    Case("demo-bundled-data-ok", "demo --rows 0", 0, ""),
    Case("demo-data-missing", "demo --data /no/data", 2, "demo data not found under /no/data (use --data)"),
    Case("demo-rows-word", "demo --rows x", 2, "argument --rows: invalid int value: 'x'"),
    Case("demo-rows-negative", "demo --rows -1 --data {d}/dir", 2, "--rows must be >= 0, got -1"),
    Case("demo-cluster-zero", "demo --cluster 0", 2, "--cluster must be >= 1, got 0"),
    Case("demo-cluster-word", "demo --cluster x", 2, "argument --cluster: invalid int value: 'x'"),
    # ------------------------------------------------------------ container
    Case("container-no-zk", "container", 2, "the following arguments are required: --zk"),
    Case("container-capacity-zero", C + " --capacity 0", 2, "--capacity must be >= 1, got 0"),
    Case("container-capacity-word", C + " --capacity x", 2, "argument --capacity: invalid int value: 'x'"),
    Case("container-session-timeout-negative", C + " --session-timeout -1", 2, "--session-timeout must be > 0, got -1"),
    Case("container-session-timeout-nan", C + " --session-timeout nan", 2, "--session-timeout must be a finite number, got nan"),
    Case("container-bind-nonsense", C + " --bind nonsense", 2, "--bind must be a ZeroMQ endpoint such as tcp://127.0.0.1:*"),
    Case("container-bind-no-port", C + " --bind tcp://127.0.0.1", 2, "--bind must be a ZeroMQ endpoint"),
    Case("container-metrics-port-too-big", C + " --metrics-port 99999", 2, "--metrics-port must be 0-65535, got 99999"),
    Case("container-metrics-port-negative", C + " --metrics-port -1", 2, "--metrics-port must be 0-65535, got -1"),
    Case("container-log-level-unknown", C + " --log-level LOUD", 2, "--log-level must be one of debug, info, warning, error, critical, got 'LOUD'"),
    Case("container-zk-auth-file-missing", f"container --zk {NOZK} --zk-auth-file /no/such", 2, "/no/such: cannot read the ZooKeeper credential (No such file or directory)"),
    Case("container-zk-auth-file-and-insecure", C + " --zk-auth-file /no/such", 2, "--zk-auth-file"),
    Case("container-cache-mb-negative", C + " --remote-store --cache-mb -1", 2, "--cache-mb"),
    # ------------------------------------------------------------ coordinator
    Case("coordinator-no-zk", "coordinator", 2, "the following arguments are required: --zk"),
    Case("coordinator-tick-zero", CO + " --tick-interval 0", 2, "--tick-interval must be > 0, got 0"),
    Case("coordinator-tolerance-negative", CO + " --tolerance -1", 2, "--tolerance must be >= 0, got -1"),
    Case("coordinator-max-moves-negative", CO + " --max-moves -1", 2, "--max-moves must be >= 0, got -1"),
    Case("coordinator-max-moves-word", CO + " --max-moves x", 2, "argument --max-moves: invalid int value: 'x'"),
    Case("coordinator-session-timeout-zero", CO + " --session-timeout 0", 2, "--session-timeout must be > 0, got 0"),
    Case("coordinator-metrics-port-bad", CO + " --metrics-port 70000", 2, "--metrics-port must be 0-65535, got 70000"),
    Case("coordinator-log-level-unknown", CO + " --log-level chatty", 2, "--log-level must be one of debug, info"),
    # ------------------------------------------------------------ status / containers
    Case("status-no-local-cluster", "status --dir /no/cluster", 2, "no --zk and no local cluster in /no/cluster"),
    Case("containers-action-choice", "containers grow 1", 2, "argument action: invalid choice: 'grow'"),
    Case("containers-add-negative", "containers add -1 --dir /no/cluster", 2, "containers add needs a count >= 1, got '-1'"),
    Case("containers-add-word", "containers add x --dir /no/cluster", 2, "containers add needs a count >= 1, got 'x'"),
    Case("containers-add-zero", "containers add 0 --dir /no/cluster", 2, "containers add needs a count >= 1, got '0'"),
    Case("containers-remove-no-cluster", "containers remove c9 --dir /no/cluster", 2, "no local cluster recorded in /no/cluster"),
    Case("containers-timeout-zero", "containers remove c9 --timeout 0 --dir /no/cluster", 2, "--timeout must be > 0, got 0"),
    # ------------------------------------------------------------ autoscaler
    Case("autoscaler-no-bounds", f"autoscaler --zk {NOZK} --insecure", 2, "the following arguments are required: --autoscale"),
    Case("autoscaler-bounds-reversed", f"autoscaler --zk {NOZK} --insecure --autoscale 5:2", 2, "argument --autoscale: expected 0 <= MIN <= MAX, got '5:2'"),
    Case("autoscaler-bounds-word", f"autoscaler --zk {NOZK} --insecure --autoscale x", 2, "argument --autoscale: expected MIN:MAX, got 'x'"),
    Case("autoscaler-driver-choice", AS + " --autoscale-driver gcp", 2, "argument --autoscale-driver: invalid choice: 'gcp'"),
    Case("autoscaler-aws-without-group", AS + " --autoscale-driver aws", 2, "--autoscale-driver aws needs --group"),
    Case("autoscaler-local-without-cluster", AS + " --autoscale-driver local --dir /no/cluster", 2, "the local driver needs a local cluster in /no/cluster"),
    Case("autoscaler-interval-zero", AS + " --interval 0", 2, "--interval must be > 0, got 0"),
    Case("autoscaler-busy-high-above-one", AS + " --busy-high 2", 2, "--busy-high is a fraction of busy time: 0 to 1, got 2.0"),
    Case("autoscaler-busy-low-negative", AS + " --busy-low -0.5", 2, "--busy-low is a fraction of busy time: 0 to 1, got -0.5"),
    Case("autoscaler-busy-low-above-high", AS + " --busy-low 0.9 --busy-high 0.5", 2, "busy_low must be below busy_high"),
    Case("autoscaler-target-lag-zero", AS + " --target-lag-ms 0", 2, "target lag must be positive, got 0.0"),
    Case("autoscaler-step-out-zero", AS + " --step-out 0", 2, "step_out must be at least 1"),
    Case("autoscaler-cooldown-negative", AS + " --out-cooldown -5", 2, "out_cooldown_s must not be negative"),
    # ------------------------------------------------------------ queries (client)
    Case("queries-no-action", "queries", 1, ""),
    Case("queries-add-missing-file", "queries add /no/q.rq --url http://127.0.0.1:9", 2, "cannot read /no/q.rq: [Errno 2] No such file or directory"),
    Case("queries-add-unreachable", "queries add {d}/q.rq --url http://127.0.0.1:9 --token t", 2, "cannot reach http://127.0.0.1:9: [Errno 111] Connection refused"),
    Case("queries-ls-url-without-scheme", "queries ls --url notaurl --token t", 2, "cannot reach notaurl: Request URL is missing an 'http://' or 'https://' protocol."),
    Case("queries-rm-unreachable", "queries rm x --url http://127.0.0.1:9 --token t", 2, "cannot reach http://127.0.0.1:9: [Errno 111] Connection refused"),
    # ------------------------------------------------------------ run (refused before serving)
    Case("run-empty-token", "run --port 0 --token ''", 2, "empty token"),
    Case("run-port-too-big", RUN.replace("--port 0", "--port 99999"), 2, "--port must be 0-65535, got 99999"),
    Case("run-port-word", "run --port http", 2, "argument --port: invalid int value: 'http'"),
    Case("run-host-unknown", RUN + " --host no.such.host.invalid", 2, "cannot listen on no.such.host.invalid:0"),
    Case("run-default-step-zero", RUN + " --default-step 0", 2, "--default-step must be >= 1, got 0"),
    Case("run-idle-ms-negative", RUN + " --idle-ms -1", 2, "--idle-ms must be >= 0, got -1"),
    Case("run-retention-negative", RUN + " --retention-ms -1", 2, "--retention-ms must be >= 0, got -1"),
    Case("run-results-retention-negative", RUN + " --results-retention -1", 2, "--results-retention must be >= 0, got -1"),
    Case("run-results-retention-nan", RUN + " --results-retention nan", 2, "--results-retention must be a finite number, got nan"),
    Case("run-base-relative", RUN + " --base nope", 2, "--base 'nope' is not an absolute IRI"),
    Case("run-log-level-choice", RUN + " --log-level loud", 2, "argument --log-level: invalid choice: 'loud'"),
    Case("run-max-time-jump-word", RUN + " --max-time-jump soon", 2, "argument --max-time-jump: bad duration 'soon'"),
    Case("run-sparql-max-rows-zero", RUN + " --sparql-max-rows 0", 2, "--sparql-max-rows must be a positive number, got 0"),
    Case("run-max-body-bytes-zero", RUN + " --max-body-bytes 0", 2, "--max-body-bytes"),
    Case("run-tls-cert-alone", RUN + " --tls-cert {d}/g.nt", 2, "--tls-cert and --tls-key go together"),
    Case("run-tls-files-missing", RUN + " --tls-cert /no/c.pem --tls-key /no/k.pem", 2, "--tls-cert '/no/c.pem' is not a readable file"),
    Case("run-tls-not-pem", RUN + " --tls-cert {d}/g.nt --tls-key {d}/g.nt", 2, "cannot use --tls-cert/--tls-key"),
    Case("run-tokens-file-missing", "run --port 0 --tokens-file /no/t.json", 2, "--tokens-file '/no/t.json' is not a readable file"),
    Case("run-static-missing", RUN + " --static /no/g.nt", 2, "static graph file '/no/g.nt' does not exist"),
    Case("run-static-directory", RUN + " --static {d}/dir", 2, "'{d}/dir' is a directory, not an RDF file"),
    Case("run-absorb-without-store", RUN + " --absorb http://ex.org/s", 2, "--absorb needs --store DIR"),
    Case("run-zk-with-store", f"run --port 0 --zk {NOZK} --store {{d}}/store", 2, "--store, --absorb and --dictionary are not supported with --zk yet"),
    Case("run-zk-tick-zero", f"run --port 0 --zk {NOZK} --insecure --tick-interval 0", 2, "--tick-interval must be > 0, got 0"),
    Case("run-store-missing", RUN + " --store /no/store", 2, "not a LinkStream store (no store.json): /no/store"),
    Case("run-dictionary-scheme", RUN + " --dictionary foo:bar", 2, "unknown dictionary backend 'foo:bar'"),
    Case("run-checkpoint-interval-negative", RUN + " --state-dir {d}/state --checkpoint-interval -1", 2, "--checkpoint-interval"),
    Case("run-log-ship-interval-negative", RUN + " --state-dir {d}/state --log-ship-interval -1", 2, "--log-ship-interval must be >= 0 seconds, got -1.0"),
    # ------------------------------------------------------------ restore
    Case("restore-no-log", "restore", 2, "one of the arguments --log --store is required"),
    Case("restore-log-missing", "restore --log /no/dir", 2, "--log /no/dir: no ingest log there (expected /no/dir/log/, or a log shipped to --checkpoint)"),
    Case("restore-log-is-a-file", "restore --log {d}/g.nt", 2, "--log {d}/g.nt: no ingest log there"),
    Case("restore-default-step-word", "restore --log {d}/dir --default-step x", 2, "argument --default-step: invalid int value: 'x'"),
    # ------------------------------------------------------------ store-node
    Case("store-node-no-store", "store-node", 2, "the following arguments are required: --store"),
    Case("store-node-store-missing", "store-node --store /no/store", 2, "/no/store"),
    Case("store-node-partitions-bad", "store-node --store {d}/store --partitions x-y", 2, "--partitions"),
    Case("store-node-transport-unknown", "store-node --store {d}/store --transports pigeon", 2, "pigeon"),
]
# fmt: on


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``main(argv)`` in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli_main(argv)
        except SystemExit as e:  # argparse
            code = e.code if isinstance(e.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _argv(template: str, d: Path) -> list[str]:
    import shlex

    return shlex.split(template.replace("{d}", str(d)))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_flag(case: Case, d: Path) -> None:
    t0 = time.perf_counter()
    code, out, err = run_cli(_argv(case.argv, d))
    assert time.perf_counter() - t0 < 15, "refused too late (did it reach ZooKeeper?)"
    assert "Traceback" not in err
    says = case.says.replace("{d}", str(d))
    if case.code == 0:
        assert code == 0, err
        return
    assert code == case.code, err
    if case.says:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], err


def test_every_subcommand_has_cases() -> None:
    """The corpus covers every subcommand ``linkstream --help`` lists."""
    from linkstream.cli.main import build_parser

    ap = build_parser()
    names = {
        n for a in ap._actions if hasattr(a, "choices") and isinstance(a.choices, dict) for n in a.choices
    }
    covered = {c.argv.replace(R, "replay").replace(C, "container").replace(CO, "coordinator").replace(AS, "autoscaler").replace(RUN, "run").split(" ")[0] for c in CASES}  # fmt: skip
    assert names <= covered, names - covered


# ------------------------------------------------------------ subprocess: the real command


def _real(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "linkstream.cli", *argv], capture_output=True, text=True, timeout=timeout
    )


def test_subprocess_usage_errors_are_one_line(d: Path) -> None:
    for argv, says in (
        (
            ["replay", "--query", str(d / "q.rq"), "--out", "-", "--default-step", "x"],
            "invalid int value: 'x'",
        ),
        (["container", "--zk", NOZK, "--insecure", "--capacity", "0"], "--capacity must be >= 1, got 0"),
        (["store", "verify", str(d / "dir")], "not a LinkStream store"),
    ):
        r = _real(*argv)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and says in r.stderr, r.stderr


def test_subprocess_replay_writes_the_results(d: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    r = _real(
        "replay",
        "--query",
        str(d / "q.rq"),
        "--stream",
        f"http://ex.org/s={d}/s.nq",
        "--out",
        str(out),
        "--quiet",
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r_["t"], r_["binding"]) for r_ in rows] == [(1704067202000, {"o": '"1"'})]


def test_subprocess_unreachable_zookeeper_is_one_runtime_line() -> None:
    """``status --zk`` with nothing listening: exit 1 after the one-shot connect timeout
    (default 10 s, was kazoo's 30 s), one line."""
    t0 = time.perf_counter()
    r = _real("status", "--zk", NOZK, "--insecure", timeout=60)
    assert 9 < time.perf_counter() - t0 < 20, time.perf_counter() - t0
    assert r.returncode == 1, r.stderr
    assert (
        r.stderr.strip()
        .splitlines()[-1]
        .startswith(f"error: cannot reach ZooKeeper at {NOZK}: connection time-out")
    )
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        ("status --zk {z} --insecure", 1, "cannot reach ZooKeeper at {z}: connection time-out"),
        ("sparql --zk {z} --insecure 'ASK {}'", 2, "cannot connect to ZooKeeper {z}: "),
        (R + " --zk {z} --insecure", 1, "cannot reach ZooKeeper at {z}: connection time-out"),
        (
            "containers remove oc-1 --dir {d}/zkdown",
            1,
            "cannot reach ZooKeeper at the local cluster: connection time-out",
        ),
    ],
    ids=["status", "sparql", "replay", "containers"],
)
def test_one_shot_zookeeper_connect_timeout_is_a_setting(
    argv: str, code: int, says: str, d: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One-shot commands give up on an unreachable ZooKeeper after
    ``LINKSTREAM_CLUSTER_ZK_CONNECT_TIMEOUT`` seconds, with one line."""
    from linkstream.cluster.localcluster import LocalCluster

    LocalCluster(d / "zkdown", zk=NOZK, insecure=True).save()
    monkeypatch.setenv("LINKSTREAM_CLUSTER_ZK_CONNECT_TIMEOUT", "1")
    t0 = time.perf_counter()
    got, _, err = run_cli(_argv(argv.replace("{z}", NOZK), d))
    assert time.perf_counter() - t0 < 6, "the setting was not used"
    lines = err.strip().splitlines()
    assert got == code and len(lines) == 1, err
    assert lines[0].startswith("error: " + says.replace("{z}", NOZK).replace("{d}", str(d))), err


def test_one_shot_zookeeper_connect_timeout_must_be_positive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINKSTREAM_CLUSTER_ZK_CONNECT_TIMEOUT", "0")
    code, _, err = run_cli(["status", "--zk", NOZK, "--insecure"])
    assert code == 1 and err.strip() == (
        "error: ConfigError: LINKSTREAM_CLUSTER_ZK_CONNECT_TIMEOUT must be > 0 seconds, got 0.0"
    ), err


def test_subprocess_interrupted_replay_leaves_no_traceback(d: Path, tmp_path: Path) -> None:
    """SIGINT while a big replay runs: exit status 130, nothing on stderr but progress."""
    big = tmp_path / "big.nq"
    lines = []
    for i in range(200_000):
        lines.append(
            f'<http://ex.org/g{i}> <http://www.w3.org/ns/prov#generatedAtTime> "2024-01-01T00:00:00.{i % 1000:03d}Z"'
            f"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n"
        )
    big.write_text("".join(lines))
    p = subprocess.Popen(
        [sys.executable, "-m", "linkstream.cli", "replay", "--query", str(d / "q.rq"), "--quiet",
         "--stream", f"http://ex.org/s={big}", "--out", os.devnull],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(2.0)
    p.send_signal(2)
    _, err = p.communicate(timeout=60)
    assert p.returncode in (0, 130), err
    assert "Traceback" not in err


# ------------------------------------------------------------ queries add|ls|rm against a real server

QOK = "SELECT ?x WHERE { STREAM <http://ex.org/s> [RANGE 1s] { ?x ?p ?o } }"

# fmt: off
CLIENT: list[tuple[str, list[str], str, int, str]] = [
    # (id, argv after "queries", token name or "", exit status, stderr line / stdout start)
    ("add-bad-window", ["add", "{d}/qbad.rq"], "admin", 2, "error: 400: {d}/qbad.rq:1:51: negative numbers are not allowed in a window"),
    ("add-syntax", ["add", "{d}/qsyntax.rq"], "admin", 2, "error: 400: {d}/qsyntax.rq:1:17: '{' is never closed"),
    ("add-not-utf8", ["add", "{d}/bin.rq"], "admin", 2, "error: cannot read {d}/bin.rq: 'utf-8' codec can't decode byte 0xff"),
    ("add-too-big", ["add", "{d}/qbig.rq"], "admin", 2, "error: 413: query text of 20070 bytes is larger than 16384 bytes (limit max_query_bytes=16384, flag --max-query-bytes)"),
    ("add-ok", ["add", "{d}/qok.rq"], "admin", 0, "qok\tcqels\tSELECT\t<http://ex.org/s> [RANGE 1000ms STEP default]"),
    ("add-same-name-again", ["add", "{d}/qok.rq"], "admin", 2, "error: 409: a query named 'qok' is already registered"),
    ("add-read-scope", ["add", "{d}/qok.rq", "--name", "other"], "reader", 2, "error: 403: token 'reader' has scope read; POST /queries needs scope write"),
    ("add-no-token", ["add", "{d}/qok.rq", "--name", "other"], "", 2, "error: 401: missing bearer token: send 'Authorization: Bearer TOKEN'"),
    ("ls-wrong-token", ["ls"], "wrong", 2, "error: 401: wrong bearer token: send 'Authorization: Bearer TOKEN'"),
    ("rm-unknown", ["rm", "nope"], "admin", 2, "error: 404: no query named 'nope' is registered"),
    ("rm-someone-elses", ["rm", "qok"], "other", 2, "error: 403"),
    ("rm-ok", ["rm", "qok"], "admin", 0, "removed qok"),
]
# fmt: on


@pytest.fixture(scope="module")
def server_url(make_server: object) -> str:
    return make_server().url  # type: ignore[operator,attr-defined]


@pytest.mark.parametrize(("case_id", "argv", "token", "code", "says"), CLIENT, ids=[c[0] for c in CLIENT])
def test_queries_client(
    case_id: str, argv: list[str], token: str, code: int, says: str, d: Path, server_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    import httpx

    from tests.robustness.conftest import TOKENS

    monkeypatch.delenv("LINKSTREAM_API_TOKEN", raising=False)
    (d / "qok.rq").write_text(QOK)
    (d / "qbad.rq").write_text(QOK.replace("1s", "-1s"))
    (d / "qsyntax.rq").write_text(QOK[:-2])
    (d / "qbig.rq").write_text(QOK + " #" + "x" * 20_000)
    secret = TOKENS[token][1] if token in TOKENS else token
    args = ["queries", *[a.replace("{d}", str(d)) for a in argv], "--url", server_url]
    got, out, err = run_cli([*args, "--token", secret] if secret else args)
    assert "Traceback" not in err
    assert got == code, err
    text = (out if code == 0 else err).strip()
    assert len(text.splitlines()) == 1 and text.startswith(says.replace("{d}", str(d))), text
    assert httpx.get(server_url + "/healthz", timeout=10).status_code == 200  # the server still serves


def test_unexpected_error_is_one_line_unless_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last resort of ``main``: an unforeseen exception is one line, exit status 1; with
    ``--log-level debug`` the traceback is shown (the exception propagates)."""
    import linkstream.cli.cluster as commands

    def boom(args: object) -> int:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(commands, "cmd_coordinator", boom)
    code, _, err = run_cli(["coordinator", "--zk", NOZK, "--insecure"])
    assert code == 1
    assert err == "error: RuntimeError: boom second line (--log-level debug shows the traceback)\n"
    with pytest.raises(RuntimeError, match="boom"):
        cli_main(["coordinator", "--zk", NOZK, "--insecure", "--log-level", "debug"])
