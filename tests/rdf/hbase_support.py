"""Helpers shared by the HBase dictionary tests: fresh tables and the optional real gateway.

By default the tests run against :class:`tests.rdf.hbase_emulator.HBaseThriftEmulator`,
an in-process test double.  Set ``LINKSTREAM_TEST_HBASE=host:port`` to run the same
tests against a real HBase Thrift 1 gateway (``hbase thrift start``) as well; each test
then creates its own ``linkstream_test_*`` table and drops it afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import happybase
import pytest

LIVE_ENV = "LINKSTREAM_TEST_HBASE"


def live_address_or_skip() -> str:
    """``host:port`` of the real HBase Thrift gateway named by ``LINKSTREAM_TEST_HBASE``.

    Returns:
        The address.  The calling test is skipped, with the reason, when it is unset.
    """
    address = os.environ.get(LIVE_ENV, "").strip()
    if not address:
        pytest.skip(f"{LIVE_ENV}=host:port is not set: no real HBase Thrift gateway to test against")
    return address


def fresh_table() -> str:
    """A table name no other test uses."""
    return f"linkstream_test_{uuid.uuid4().hex[:12]}"


def split_address(address: str) -> tuple[str, int]:
    """``"host:port"`` -> ``("host", port)`` (port 9090 when omitted)."""
    host, _, port = address.rpartition(":") if ":" in address else (address, "", "9090")
    return host, int(port)


def drop_table(address: str, table: str) -> None:
    """Disable and delete ``table`` if it exists (cleanup after a test).

    Args:
        address: ``host:port`` of the Thrift gateway.
        table: table name.
    """
    host, port = split_address(address)
    conn = happybase.Connection(host, port)
    try:
        if table.encode() in conn.tables():
            conn.delete_table(table, disable=True)
    finally:
        conn.close()


@dataclass(frozen=True)
class Backend:
    """One backend of a contract suite run over memory:, lmdb:, the emulator and a live gateway."""

    uri: Callable[[Path, str], str]  # (test directory, server address) -> URI
    persistent: bool
    server: str | None = None  # fixture giving the server's "host:port"


def backends(lmdb_name: str) -> dict[str, Backend]:
    """The backends of a contract suite; LMDB data lives in ``<test dir>/<lmdb_name>``."""
    return {
        "memory": Backend(uri=lambda tmp, addr: "memory:", persistent=False),
        "lmdb": Backend(uri=lambda tmp, addr: f"lmdb:{tmp / lmdb_name}", persistent=True),
        "hbase": Backend(
            uri=lambda tmp, addr: f"hbase://{addr}/{fresh_table()}",
            persistent=True,
            server="hbase_emulator_address",
        ),
        "hbase-live": Backend(
            uri=lambda tmp, addr: f"hbase://{addr}/{fresh_table()}",
            persistent=True,
            server="hbase_live_address",
        ),
    }
