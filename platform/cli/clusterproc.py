"""What the cluster commands of ``linkstream`` share (:mod:`linkstream.cli.cluster`,
:mod:`linkstream.cli.autoscaler`, ``sparql`` and ``store-node`` against a cluster): their
logging, ending on SIGTERM/SIGINT, leaving a ZooKeeper that cannot be reached, the checks of
the flags they have in common, their ZooKeeper security and connect timeout.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the parsers are built on every command; zmq loads only when used
    from linkstream.containers.security import Security

logger = logging.getLogger(__name__)


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def handler(_sig: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def exit_if_stuck(status: int) -> int:
    """Ends the process now if ZooKeeper could not be left (kazoo threads would block exit)."""
    if status >= 0:
        return status
    logger.warning("ZooKeeper unreachable at shutdown; exiting without closing the session")
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_ENDPOINT = re.compile(
    r"^(tcp://(\*|[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\]):(\*|[0-9]{1,5})|ipc://.+|inproc://.+)$"
)


def option_error(args: argparse.Namespace) -> str | None:
    """The first bad value among the flags every cluster command shares (and those of
    ``container``, ``coordinator``/``run --zk`` and ``autoscaler``), as one line; else ``None``."""
    from linkstream.cli.args import number_error

    level = getattr(args, "log_level", None)
    if level is not None and str(level).upper() not in _LEVELS:
        return f"--log-level must be one of {', '.join(x.lower() for x in _LEVELS)}, got {level!r}"
    port = getattr(args, "metrics_port", None)
    if port is not None and not 0 <= port <= 65535:
        return f"--metrics-port must be 0-65535, got {port}"
    bind = getattr(args, "bind", None)
    if bind is not None and not _ENDPOINT.match(bind):
        return (
            f"--bind must be a ZeroMQ endpoint such as tcp://127.0.0.1:* or tcp://0.0.0.0:5555, got {bind!r}"
        )
    for flag in ("busy_high", "busy_low"):
        value = getattr(args, flag, None)
        if value is not None and not 0 <= value <= 1:
            return f"--{flag.replace('_', '-')} is a fraction of busy time: 0 to 1, got {value}"
    return (
        number_error("--session-timeout", getattr(args, "session_timeout", None), 0, strict=True)
        or number_error("--capacity", getattr(args, "capacity", None), 1)
        or number_error("--tick-interval", getattr(args, "tick_interval", None), 0, strict=True)
        or number_error("--tolerance", getattr(args, "tolerance", None), 0)
        or number_error("--max-moves", getattr(args, "max_moves", None), 0)
        or number_error("--interval", getattr(args, "interval", None), 0, strict=True)
        or number_error("--timeout", getattr(args, "timeout", None), 0, strict=True)
        or number_error("--cache-mb", getattr(args, "cache_mb", None), 0, strict=True)
    )


def refuse_bad_options(args: argparse.Namespace) -> bool:
    """Prints the first bad flag value (see :func:`option_error`); ``True`` if there was one."""
    problem = option_error(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
    return problem is not None


def cluster_security(args: argparse.Namespace) -> Security | None:
    """The security ``args`` and the settings give (``--zk-auth-file``, ``--insecure``,
    ``--zk-tls-ca``, ``LINKSTREAM_CLUSTER_ZK_AUTH[_FILE]``, ``LINKSTREAM_CLUSTER_ZK_TLS_*``); ``None`` after printing one line saying why not."""
    from linkstream.config import ConfigError, load
    from linkstream.containers.security import SecurityError, resolve

    try:
        cfg = load().cluster
        return resolve(
            auth_file=getattr(args, "zk_auth_file", None),
            insecure=bool(getattr(args, "insecure", False)),
            env_auth=cfg.zk_auth,
            env_auth_file=cfg.zk_auth_file,
            curve_keys=cfg.curve_keys,
            zk_tls_ca=getattr(args, "zk_tls_ca", None) or cfg.zk_tls_ca,
            zk_tls_cert=cfg.zk_tls_cert,
            zk_tls_key=cfg.zk_tls_key,
        )
    except (SecurityError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return None


def zk_connect_timeout() -> float:
    """Seconds a one-shot command waits for ZooKeeper (``[cluster] zk_connect_timeout``).

    Raises:
        ConfigError: The setting is not a positive number.
    """
    from linkstream.config import ConfigError, load

    seconds = load().cluster.zk_connect_timeout
    if not 0 < seconds < float("inf"):
        raise ConfigError(f"LINKSTREAM_CLUSTER_ZK_CONNECT_TIMEOUT must be > 0 seconds, got {seconds}")
    return seconds
