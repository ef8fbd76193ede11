"""``linkstream sparql``: one-shot SPARQL 1.1 queries over a store directory, or over the
store nodes advertised in ZooKeeper (``--zk``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from linkstream.query.errors import QueryError


def add_parsers(sub: Any) -> None:
    """Adds ``sparql`` and ``store verify`` to the ``linkstream`` subcommand parsers."""
    _add_store_parser(sub)
    sp = sub.add_parser(
        "sparql",
        help="answer a one-shot SPARQL 1.1 query over a store directory or store nodes",
        description=(
            "Answer a SELECT, ASK or CONSTRUCT query over a store directory (written by "
            "'linkstream load') by graph exploration of its indexes, or with --zk over the "
            "store nodes ('linkstream store-node') advertised in that ZooKeeper: the same "
            "results, the indexes read remotely. SELECT/ASK results are "
            "printed as SPARQL 1.1 Query Results JSON (or TSV), CONSTRUCT results as "
            'N-Triples statements (a JSON object {"triples": [...]} with --format json).'
        ),
    )
    where = sp.add_mutually_exclusive_group(required=True)
    where.add_argument("--store", metavar="DIR", help="the store directory")
    where.add_argument(
        "--zk",
        metavar="HOST:PORT[/CHROOT]",
        help="read the store from the store nodes advertised in this ZooKeeper (under ROOT/storenodes); "
        "with security on, this process publishes its CURVE key under ROOT/readers while it runs",
    )
    sp.add_argument(
        "--root",
        default="/linkstream",
        help="cluster root inside the chroot, with --zk (default %(default)s)",
    )
    from linkstream.cli.main import add_security_options

    add_security_options(sp)
    sp.add_argument(
        "query", metavar="QUERY_OR_FILE", help="the query text, a file holding it, or - for stdin"
    )
    sp.add_argument(
        "--default-graph-uri",
        action="append",
        default=None,
        metavar="IRI",
        help="a graph of the default graph, replacing the query's FROM (repeatable)",
    )
    sp.add_argument(
        "--named-graph-uri",
        action="append",
        default=None,
        metavar="IRI",
        help="a named graph, replacing the query's FROM NAMED (repeatable)",
    )
    sp.add_argument("--format", choices=("json", "tsv"), default="json", help="output format (default json)")
    sp.add_argument(
        "--base", default="http://localhost/", metavar="IRI", help="base IRI (default %(default)s)"
    )
    sp.add_argument("--stats", action="store_true", help="print timings and the result size on stderr")
    sp.add_argument("--explain", action="store_true", help="print the operator plan on stderr")
    sp.set_defaults(func=cmd_sparql)


def _read_query(arg: str) -> tuple[str, str]:
    """(text, source name) of the QUERY_OR_FILE argument."""
    if arg == "-":
        return sys.stdin.read(), "<stdin>"
    if os.path.isfile(arg):
        with open(arg, encoding="utf-8", errors="surrogateescape") as f:
            return f.read(), arg
    return arg, "query"


def _add_store_parser(sub: Any) -> None:
    stp = sub.add_parser("store", help="maintain a store directory (store verify)")
    stsub = stp.add_subparsers(dest="store_command", metavar="COMMAND", required=True)
    vp = stsub.add_parser(
        "verify",
        help="check every file of a store directory against its manifest's sizes and checksums",
        description=(
            "Recompute the checksum of every file the store manifest records and compare sizes, "
            "then count each graph's triples in its partitions against the manifest's count. "
            "Prints OK, or one line per missing, truncated or altered file or wrong count. Exit status 0 if "
            "intact, 1 if damaged, 2 if DIR is not a readable store."
        ),
    )
    vp.add_argument("dir", metavar="DIR", help="the store directory")
    vp.set_defaults(func=cmd_store_verify)


def cmd_store_verify(args: argparse.Namespace) -> int:
    """Runs ``linkstream store verify DIR``."""
    from linkstream.store.layout import read_manifest, verify_files

    try:
        manifest = read_manifest(args.dir)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    checked, bad = verify_files(args.dir, manifest)
    if not bad:  # sizes and checksums cannot tell an overwritten LMDB file: open it
        from linkstream.store.layout import open_store_dictionary

        try:
            open_store_dictionary(args.dir, manifest).close()
        except (OSError, ValueError) as e:
            bad.append(f"{args.dir}: dictionary {manifest.dictionary}: {' '.join(str(e).split())}")
    if bad:
        for line in bad:
            print(f"DAMAGED {line}")
        print(f"{len(bad)} of {checked} files damaged", file=sys.stderr)
        return 1
    if not checked:
        print(f"OK {args.dir} (no checksums recorded: store written before integrity records)")
    else:
        print(f"OK {args.dir} ({checked} files)")
    return 0


def cmd_sparql(args: argparse.Namespace) -> int:
    """Runs ``linkstream sparql``."""
    from linkstream.engine.oneshot.store import run_sparql
    from linkstream.store.layout import read_manifest
    from linkstream.store.persistent import PersistentStore

    def err(msg: str) -> int:
        print("error: " + msg, file=sys.stderr)
        return 2

    from linkstream.cli.args import base_error, use_parse_cache
    from linkstream.rdf.ntriples import iri_error

    problem = base_error(args.base)
    for flag, iris in (
        ("--default-graph-uri", args.default_graph_uri),
        ("--named-graph-uri", args.named_graph_uri),
    ):
        bad = next(((i, p) for i in iris or [] if (p := iri_error(i)) is not None), None)
        problem = problem or (f"{flag} {bad[0]!r}: {bad[1]}" if bad else None)
    if problem:
        return err(problem)
    if os.path.isdir(args.query):
        return err(f"{args.query} is a directory, not a query or a query file")
    try:
        text, source = _read_query(args.query)
    except OSError as e:
        return err(f"cannot read {args.query}: {e.strerror or e}")
    if args.zk:
        return _sparql_remote(args, text, source)
    if args.insecure or args.zk_auth_file or args.zk_tls_ca:
        return err("--insecure, --zk-auth-file and --zk-tls-ca go with --zk (a store directory needs none)")
    try:
        manifest = read_manifest(args.store)
    except (FileNotFoundError, ValueError) as e:
        return err(str(e))
    t0 = time.perf_counter()
    if args.stats or manifest.total_triples > 5_000_000:
        print(f"opening {args.store} ({manifest.total_triples} triples) ...", file=sys.stderr)
    try:
        store = PersistentStore.open(args.store, background_compaction=False)
    except (OSError, ValueError) as e:
        return err(f"cannot open store {args.store}: {e}")
    t1 = time.perf_counter()
    use_parse_cache()
    try:
        res = run_sparql(
            store,
            text,
            args.default_graph_uri,
            args.named_graph_uri,
            base=args.base,
            source=source,
            explain=(lambda text: print(text, file=sys.stderr)) if args.explain else None,
        )
    except QueryError as e:
        store.close()  # (it holds the LMDB environment, which a process may open only once)
        return err(str(e))
    finally:
        t2 = time.perf_counter()
    try:
        _print_result(res, args.format)
    finally:
        store.close()
    if args.stats:
        n = len(res["results"]["bindings"]) if "results" in res else len(res.get("triples", [])) or 1
        print(f"open {t1 - t0:.3f}s  query {t2 - t1:.3f}s  results {n}", file=sys.stderr)
    return 0


def _sparql_remote(args: argparse.Namespace, text: str, source: str) -> int:
    """``linkstream sparql --zk``: the query over the store nodes advertised in ZooKeeper."""
    from linkstream.cli.clusterproc import cluster_security, zk_connect_timeout
    from linkstream.engine.oneshot.store import run_sparql
    from linkstream.rdma.regions import RegionError
    from linkstream.store.dictserver import DictionaryError
    from linkstream.store.node import StoreNodeError, publish_reader_key
    from linkstream.store.remote import RemoteStore, RemoteStoreError

    security = cluster_security(args)
    if security is None:
        return 2
    t0 = time.perf_counter()
    try:
        client = security.connect(args.zk, 10.0, zk_connect_timeout())
    except Exception as e:  # noqa: BLE001 - kazoo timeouts, auth failures: one line
        print(f"error: cannot connect to ZooKeeper {args.zk}: {e}", file=sys.stderr)
        return 2
    store = None
    try:
        if security.public is not None:
            publish_reader_key(client, args.root, security.public, "sparql")
        store = RemoteStore(client=client, root=args.root, curve_client=security.client)
        t1 = time.perf_counter()
        res = run_sparql(
            store,
            text,
            args.default_graph_uri,
            args.named_graph_uri,
            base=args.base,
            source=source,
            explain=(lambda text: print(text, file=sys.stderr)) if args.explain else None,
        )
        t2 = time.perf_counter()
        _print_result(res, args.format)
    except QueryError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (RemoteStoreError, StoreNodeError, RegionError, DictionaryError) as e:
        print(f"error: store nodes of {args.zk}: {e}", file=sys.stderr)
        return 2
    finally:
        if store is not None:
            store.close()
        client.stop()
        client.close()
    if args.stats:
        n = len(res["results"]["bindings"]) if "results" in res else len(res.get("triples", [])) or 1
        print(f"connect {t1 - t0:.3f}s  query {t2 - t1:.3f}s  results {n}", file=sys.stderr)
    return 0


def _print_result(res: dict[str, Any], fmt: str) -> None:
    out = sys.stdout
    if fmt == "json":
        json.dump(res, out, ensure_ascii=False)
        out.write("\n")
        return
    if "triples" in res:
        for t in res["triples"]:
            out.write(t + "\n")
    elif "boolean" in res:
        out.write(("true" if res["boolean"] else "false") + "\n")
    else:
        names = res["head"]["vars"]
        out.write("\t".join("?" + v for v in names) + "\n")
        for b in res["results"]["bindings"]:
            out.write("\t".join(tsv_term(b[v]) if v in b else "" for v in names) + "\n")


def _escape(s: str) -> str:
    return (
        s.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )


def tsv_term(t: dict[str, Any]) -> str:
    """A SPARQL JSON term in the SPARQL 1.1 TSV results form (N-Triples-like)."""
    if t["type"] == "uri":
        return f"<{t['value']}>"
    if t["type"] == "bnode":
        return f"_:{t['value']}"
    lex = '"' + _escape(t["value"]) + '"'
    if "xml:lang" in t:
        return lex + "@" + t["xml:lang"]
    if "datatype" in t:
        return lex + f"^^<{t['datatype']}>"
    return lex
