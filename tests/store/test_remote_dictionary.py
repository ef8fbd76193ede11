"""The store's dictionary served by its store node to readers on other hosts (read only).

A container reading the dictionary through the node (as one on another host would) and
the static triples over TCP gives the CityBench slice's results equal to embedded mode;
the server answers malformed requests with one-line errors and keeps serving.
"""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest
import zmq

from linkstream.rdf.dictionary import open_dictionary
from linkstream.store.dictserver import DictionaryError, RemoteDictionary
from linkstream.store.remote import RemoteStore
from tests.store.remote_fixtures import StoreNodeProcess, build_store, replay_replica


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory):
    store = build_store(tmp_path_factory.mktemp("dict"))
    n = StoreNodeProcess(store, None, "--transports", "shm,tcp")
    yield store, n
    n.stop()


def test_remote_dictionary_answers_like_the_lmdb(node) -> None:
    store, n = node
    address = n.adv.dictionary["address"]
    assert address.startswith("tcp://127.0.0.1:")
    rd = RemoteDictionary(address)
    local = open_dictionary(n.adv.dictionary["uri"])
    try:
        assert len(rd) == len(local) > 300
        ids = list(range(1, len(local) + 1))
        terms = local.decode_many(ids)
        assert rd.decode_many(ids) == terms
        assert rd.lookup_many([*terms[:50], "<http://nowhere/x>"]).tolist() == [*ids[:50], 0]
        asked = rd.requests
        assert rd.decode_many(ids[:10]) == terms[:10] and rd.requests == asked  # memoised
        with pytest.raises(DictionaryError, match="read only"):
            rd.encode_many(["<http://new/term>"])
        with pytest.raises(DictionaryError, match=r"ids outside the dictionary's 1\.\.\d+"):
            rd.decode_many([len(local) + 5])
    finally:
        rd.close()
        local.close()


def test_malformed_dictionary_requests_get_errors(node) -> None:
    _, n = node
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.linger = 0
    sock.rcvtimeo = 5000
    sock.connect(n.adv.dictionary["address"])
    try:
        for frames, message in (
            ([b"\xc1garbage"], "not msgpack"),
            ([msgpack.packb({"op": "drop"})], "op must be"),
            ([msgpack.packb({"op": "lookup", "terms": [1, 2]})], "list of at most"),
            ([msgpack.packb({"op": "decode"}), b"12345"], "int64 ids"),
        ):
            sock.send_multipart(frames)
            answer = msgpack.unpackb(sock.recv_multipart()[0], raw=False)
            assert message in answer["error"], answer
        sock.send_multipart([msgpack.packb({"op": "len"})])
        assert msgpack.unpackb(sock.recv_multipart()[0], raw=False)["len"] > 300
    finally:
        sock.close(0)


@pytest.mark.parametrize("dialect", ["csparql", "cqels"])
def test_container_with_the_nodes_dictionary_equals_embedded(node, dialect: str) -> None:
    _, n = node
    want, local_stats, rep = replay_replica(dialect, None)
    rep.close()
    remote = RemoteStore([n.adv], prefer="tcp", dictionary_via="node", cache_bytes=1 << 20)
    try:
        got, stats, rep = replay_replica(dialect, remote)
        rep.close()
        assert isinstance(remote.dictionary, RemoteDictionary) and remote.dictionary.requests > 0
    finally:
        remote.close()
    assert want.count("\n") > 100
    assert sorted(got.splitlines()) == sorted(want.splitlines())
    assert stats["engine_static_triples"] < local_stats["engine_static_triples"]


def test_a_node_without_tcp_does_not_serve_the_dictionary(node, tmp_path: Path) -> None:
    store, _ = node
    shm_only = StoreNodeProcess(store, None, "--transports", "shm")
    try:
        assert "address" not in shm_only.adv.dictionary
        remote = RemoteStore([shm_only.adv], dictionary_via="node")
        try:
            with pytest.raises(Exception, match="does not serve it"):
                remote.dictionary  # noqa: B018 - the property opens it
        finally:
            remote.close()
    finally:
        shm_only.stop()
