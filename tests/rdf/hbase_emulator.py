"""An HBase Thrift 1 *emulator*: a test double for the ``hbase://`` dictionary backend.

This is **not HBase**.  No HBase server can be installed on the project's machines, so
the tests talk to this in-process stand-in instead.  It is built with
``thriftpy2.load()`` on the very ``Hbase.thrift`` IDL that happybase ships and it is
served by a server from thriftpy2's ``make_server`` over a real TCP socket on a free
``127.0.0.1`` port (a daemon thread accepts, one thread per connection), with the
transport and protocol happybase uses by default (buffered transport, binary protocol).  The real happybase client therefore goes through its ordinary code
path: argument marshalling, the socket, result and exception unmarshalling.

Only the Thrift calls the dictionary backend and its tests make are implemented, with
the semantics of HBase's Thrift 1 gateway (``ThriftServerRunner.HBaseHandler``):

* tables: ``getTableNames``, ``createTable``, ``deleteTable``, ``enableTable``,
  ``disableTable``, ``isTableEnabled``, ``getColumnDescriptors``;
* reads: ``get``, ``getRow``, ``getRowWithColumns``, ``getRows``, ``getRowsWithColumns``
  (rows come back in request order; rows without a matching cell are left out);
* writes: ``mutateRow``, ``mutateRows`` (deletes of a row are applied before its puts,
  unknown families raise ``IOError``, empty or over-long row keys ``IllegalArgument``),
  ``deleteAll``, ``deleteAllRow``;
* atomics: ``atomicIncrement`` (8-byte big-endian counters) and ``checkAndPut`` (an
  absent or empty expected value checks that the cell is missing or empty, as HBase
  does).

Any other method answers ``TApplicationException(UNKNOWN_METHOD)`` naming the call.
Each table is a dict of rows, each row a dict ``column -> TCell`` (value, timestamp) that
keeps one version per cell; one lock serialises every call, which makes each call
atomic (HBase only promises row atomicity, which this implies).
"""

from __future__ import annotations

import importlib.resources
import re
import socket
import struct
import threading
import time
from collections import Counter
from types import ModuleType
from typing import Any

import thriftpy2
from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.rpc import make_server
from thriftpy2.thrift import TApplicationException
from thriftpy2.transport import TBufferedTransportFactory, TTransportException

#: The Thrift 1 IDL shipped inside the installed happybase package.
HBASE_THRIFT_IDL = str(importlib.resources.files("happybase") / "Hbase.thrift")

#: The IDL loaded for the emulator's own use (a module name of its own, so it does not
#: share classes with the client side's ``Hbase_thrift``).
hbase_thrift: ModuleType = thriftpy2.load(HBASE_THRIFT_IDL, module_name="hbase_emulator_thrift")

MAX_ROW_LENGTH = 32767  # HBase's limit (Short.MAX_VALUE)
_TABLE_NAME = re.compile(rb"^[A-Za-z0-9_.:-]+$")
_I64 = struct.Struct(">q")

Row = dict[bytes, Any]  # column -> TCell (never mutated: a write replaces the cell)


class _Table:
    """One emulated table: its column families and its rows."""

    def __init__(self, families: dict[bytes, Any]) -> None:
        self.families = families  # b"cf" -> ColumnDescriptor (name b"cf:")
        self.enabled = True
        self.rows: dict[bytes, Row] = {}


def _split_column(column: bytes) -> tuple[bytes, bytes | None]:
    """``b"cf:q"`` -> ``(b"cf", b"q")``; ``b"cf"`` -> ``(b"cf", None)`` (the whole family)."""
    fam, sep, qual = column.partition(b":")
    return fam, (qual if sep else None)


class HBaseEmulatorHandler:
    """The Thrift 1 methods, over an in-memory store guarded by one lock."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._tables: dict[bytes, _Table] = {}
        self._last_ts = 0
        #: Number of calls per Thrift method name (for tests to check batching).
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in hbase_thrift.Hbase.thrift_services:
            raise AttributeError(name)

        def unimplemented(*args: object) -> None:
            raise TApplicationException(
                TApplicationException.UNKNOWN_METHOD, f"the HBase Thrift emulator does not implement {name}"
            )

        return unimplemented

    # ------------------------------------------------------------------ helpers

    def _count(self, name: str) -> None:
        self.calls[name] += 1

    def _now(self) -> int:
        ts = max(time.time_ns() // 1_000_000, self._last_ts)
        self._last_ts = ts
        return ts

    def _table(self, name: bytes, *, enabled: bool = True) -> _Table:
        table = self._tables.get(name)
        if table is None:
            raise hbase_thrift.IOError(message=f"TableNotFoundException: {name.decode(errors='replace')}")
        if enabled and not table.enabled:
            raise hbase_thrift.IOError(message=f"TableNotEnabledException: {name.decode(errors='replace')}")
        return table

    @staticmethod
    def _check_row(row: bytes | None) -> bytes:
        if not row:
            raise hbase_thrift.IllegalArgument(message="Row length is 0")
        if len(row) > MAX_ROW_LENGTH:
            raise hbase_thrift.IllegalArgument(message=f"Row length {len(row)} is > {MAX_ROW_LENGTH}")
        return row

    @staticmethod
    def _family(table: _Table, column: bytes | None) -> tuple[bytes, bytes | None]:
        fam, qual = _split_column(column or b"")
        if fam not in table.families:
            raise hbase_thrift.IOError(
                message=f"NoSuchColumnFamilyException: column family {fam.decode(errors='replace')!r} does not exist"
            )
        return fam, qual

    def _rows(self, table_name: bytes, rows: list[bytes], columns: list[bytes] | None) -> list[Any]:
        """``TRowResult`` of each of ``rows`` with a cell matching ``columns`` (all when empty)."""
        with self._lock:
            table = self._table(table_name)
            wanted: list[bytes] = []  # whole columns
            families: list[bytes] = []  # b"cf:" prefixes
            for c in columns or []:
                fam, qual = self._family(table, c)
                if qual is None:
                    families.append(fam + b":")
                else:
                    wanted.append(fam + b":" + qual)
            prefixes = tuple(families)
            out = []
            for row in rows or []:
                cells = table.rows.get(row)
                if not cells:
                    continue
                if not columns:
                    chosen = dict(cells)
                else:
                    chosen = {c: cells[c] for c in wanted if c in cells}
                    if prefixes:
                        chosen.update((c, v) for c, v in cells.items() if c.startswith(prefixes))
                if chosen:
                    out.append(hbase_thrift.TRowResult(row=row, columns=chosen))
            return out

    def _apply(self, table: _Table, row: bytes, mutations: list[Any], ts: int) -> None:
        """Mutations of one row: deletes first, then puts (as the Thrift 1 gateway does)."""
        self._check_row(row)
        parsed = [(m, *self._family(table, m.column)) for m in mutations or []]
        cells = table.rows.get(row, {})
        for m, fam, qual in parsed:
            if m.isDelete:
                if qual is None:
                    prefix = fam + b":"
                    for col in [c for c in cells if c.startswith(prefix)]:
                        del cells[col]
                else:
                    cells.pop(fam + b":" + qual, None)
        for m, fam, qual in parsed:
            if not m.isDelete:
                cells[fam + b":" + (qual or b"")] = hbase_thrift.TCell(value=m.value or b"", timestamp=ts)
        if cells:
            table.rows[row] = cells
        else:
            table.rows.pop(row, None)

    # ------------------------------------------------------------------ tables

    def getTableNames(self) -> list[bytes]:
        with self._lock:
            self._count("getTableNames")
            return sorted(self._tables)

    def createTable(self, tableName: bytes, columnFamilies: list[Any]) -> None:
        with self._lock:
            self._count("createTable")
            if not tableName or not _TABLE_NAME.match(tableName):
                raise hbase_thrift.IllegalArgument(message=f"illegal table name {tableName!r}")
            if tableName in self._tables:
                raise hbase_thrift.AlreadyExists(message=f"table {tableName.decode()} already exists")
            if not columnFamilies:
                raise hbase_thrift.IllegalArgument(message="a table needs at least one column family")
            families = {}
            for cd in columnFamilies:
                fam = (cd.name or b"").rstrip(b":")
                if not fam or b":" in fam:
                    raise hbase_thrift.IllegalArgument(message=f"illegal column family name {cd.name!r}")
                cd.name = fam + b":"
                families[fam] = cd
            self._tables[tableName] = _Table(families)

    def deleteTable(self, tableName: bytes) -> None:
        with self._lock:
            self._count("deleteTable")
            table = self._table(tableName, enabled=False)
            if table.enabled:
                raise hbase_thrift.IOError(message=f"TableNotDisabledException: {tableName.decode()}")
            del self._tables[tableName]

    def enableTable(self, tableName: bytes) -> None:
        with self._lock:
            self._count("enableTable")
            self._table(tableName, enabled=False).enabled = True

    def disableTable(self, tableName: bytes) -> None:
        with self._lock:
            self._count("disableTable")
            self._table(tableName, enabled=False).enabled = False

    def isTableEnabled(self, tableName: bytes) -> bool:
        with self._lock:
            self._count("isTableEnabled")
            return self._table(tableName, enabled=False).enabled

    def getColumnDescriptors(self, tableName: bytes) -> dict[bytes, Any]:
        with self._lock:
            self._count("getColumnDescriptors")
            table = self._table(tableName, enabled=False)
            return {cd.name: cd for cd in table.families.values()}

    # ------------------------------------------------------------------ reads

    def get(self, tableName: bytes, row: bytes, column: bytes, attributes: dict[bytes, bytes]) -> list[Any]:
        self._count("get")
        found = self._rows(tableName, [row], [column])
        return list(found[0].columns.values()) if found else []

    def getRow(self, tableName: bytes, row: bytes, attributes: dict[bytes, bytes]) -> list[Any]:
        self._count("getRow")
        return self._rows(tableName, [row], None)

    def getRowWithColumns(
        self, tableName: bytes, row: bytes, columns: list[bytes] | None, attributes: dict[bytes, bytes]
    ) -> list[Any]:
        self._count("getRowWithColumns")
        return self._rows(tableName, [row], columns)

    def getRows(self, tableName: bytes, rows: list[bytes], attributes: dict[bytes, bytes]) -> list[Any]:
        self._count("getRows")
        return self._rows(tableName, rows, None)

    def getRowsWithColumns(
        self, tableName: bytes, rows: list[bytes], columns: list[bytes] | None, attributes: dict[bytes, bytes]
    ) -> list[Any]:
        self._count("getRowsWithColumns")
        return self._rows(tableName, rows, columns)

    # ------------------------------------------------------------------ writes

    def mutateRow(
        self, tableName: bytes, row: bytes, mutations: list[Any], attributes: dict[bytes, bytes]
    ) -> None:
        with self._lock:
            self._count("mutateRow")
            self._apply(self._table(tableName), row, mutations, self._now())

    def mutateRows(self, tableName: bytes, rowBatches: list[Any], attributes: dict[bytes, bytes]) -> None:
        with self._lock:
            self._count("mutateRows")
            table = self._table(tableName)
            ts = self._now()
            for batch in rowBatches or []:
                self._apply(table, batch.row, batch.mutations, ts)

    def deleteAll(self, tableName: bytes, row: bytes, column: bytes, attributes: dict[bytes, bytes]) -> None:
        with self._lock:
            self._count("deleteAll")
            delete = hbase_thrift.Mutation(isDelete=True, column=column)
            self._apply(self._table(tableName), row, [delete], self._now())

    def deleteAllRow(self, tableName: bytes, row: bytes, attributes: dict[bytes, bytes]) -> None:
        with self._lock:
            self._count("deleteAllRow")
            self._table(tableName).rows.pop(self._check_row(row), None)

    # ------------------------------------------------------------------ atomics

    def atomicIncrement(self, tableName: bytes, row: bytes, column: bytes, value: int) -> int:
        with self._lock:
            self._count("atomicIncrement")
            table = self._table(tableName)
            self._check_row(row)
            fam, qual = self._family(table, column)
            col = fam + b":" + (qual or b"")
            cells = table.rows.setdefault(row, {})
            old = cells.get(col)
            if old is not None and len(old.value) != 8:
                raise hbase_thrift.IOError(
                    message=f"DoNotRetryIOException: Field is not a long, it's {len(old.value)} bytes wide"
                )
            new = (_I64.unpack(old.value)[0] if old else 0) + value
            new = (new + (1 << 63)) % (1 << 64) - (1 << 63)  # Java long arithmetic
            cells[col] = hbase_thrift.TCell(value=_I64.pack(new), timestamp=self._now())
            return new

    def checkAndPut(
        self,
        tableName: bytes,
        row: bytes,
        column: bytes,
        value: bytes | None,
        mput: Any,
        attributes: dict[bytes, bytes],
    ) -> bool:
        with self._lock:
            self._count("checkAndPut")
            table = self._table(tableName)
            self._check_row(row)
            fam, qual = self._family(table, column)
            if mput is None or mput.isDelete:
                raise hbase_thrift.IllegalArgument(message="checkAndPut needs a put mutation")
            self._family(table, mput.column)
            current = table.rows.get(row, {}).get(fam + b":" + (qual or b""))
            if not value:  # absent or empty expected value: the cell must be missing or empty
                matches = current is None or current.value == b""
            else:
                matches = current is not None and current.value == value
            if matches:
                self._apply(table, row, [mput], self._now())
            return matches


class HBaseThriftEmulator:
    """An HBase Thrift 1 emulator served on ``127.0.0.1`` (a test double, not HBase).

    Use it as a context manager, or call :meth:`start` and :meth:`stop`::

        with HBaseThriftEmulator() as hbase:
            conn = happybase.Connection("127.0.0.1", hbase.port)

    Args:
        host: address to bind; tests keep the default loopback address.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self.handler = HBaseEmulatorHandler()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._clients: list[Any] = []
        self._clients_lock = threading.Lock()
        self._stopped = threading.Event()

    @property
    def address(self) -> str:
        """``"HOST:PORT"`` of the running emulator."""
        return f"{self.host}:{self.port}"

    def start(self) -> HBaseThriftEmulator:
        """Bind a free port and serve in a daemon thread; returns ``self``."""
        server = make_server(
            hbase_thrift.Hbase,
            self.handler,
            host=self.host,
            port=9090,  # replaced by 0 below: make_server refuses port 0
            proto_factory=TBinaryProtocolFactory(decode_response=False),
            trans_factory=TBufferedTransportFactory(),
            client_timeout=None,  # clients may idle between tests
        )
        server.trans.port = 0
        server.trans.listen()  # bind now, so the port is known and errors surface here
        self.port = server.trans.sock.getsockname()[1]
        self._server = server
        self._thread = threading.Thread(target=self._serve, name=f"hbase-emulator-{self.port}", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        server = self._server
        while not self._stopped.is_set():
            try:
                client = server.trans.accept()
            except (OSError, AttributeError, AssertionError):
                return  # the listening socket was closed by stop()
            client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as the client does
            with self._clients_lock:
                self._clients.append(client)
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: Any) -> None:
        try:
            self._server.handle(client)
        except TTransportException:
            pass

    def stop(self) -> None:
        """Stop accepting, close every client connection and join the accept thread."""
        if self._server is None or self._stopped.is_set():
            return
        self._stopped.set()
        self._server.close()
        self._server.trans.close()
        with self._clients_lock:
            clients, self._clients = self._clients, []
        for client in clients:
            # shutting the socket down ends the handler's blocked read cleanly (it then closes
            # the socket itself); closing it under the handler would make thriftpy2 log errors
            try:
                client.sock.shutdown(socket.SHUT_RDWR)
            except (OSError, AttributeError):
                pass  # already closed by its handler
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> HBaseThriftEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"HBaseThriftEmulator({self.address!r})"
