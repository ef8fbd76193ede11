"""LinkStream settings: one typed tree, read from an optional TOML file and ``LINKSTREAM_*`` variables.

This module is the only place in the package that reads environment variables.  Every
other module takes its settings as arguments; command-line entry points call
:func:`load` once and pass the parts on.

Precedence, lowest first: the defaults below, the TOML file (``--config`` or
``$LINKSTREAM_CONFIG``), the environment, and finally command-line flags (applied by the
CLI on top of what :func:`load` returns).

Environment variables are ``LINKSTREAM_<SECTION>_<FIELD>`` in upper case, for example
``LINKSTREAM_API_TOKEN`` (``[api] token``), ``LINKSTREAM_CLUSTER_ZK`` (``[cluster] zk``),
``LINKSTREAM_CHECKPOINTS_URI`` (``[checkpoints] uri``), ``LINKSTREAM_QUERY_PARSE_CACHE``
(``[query] parse_cache``).  A few established names are
aliases: ``LINKSTREAM_CHECKPOINTS`` for ``LINKSTREAM_CHECKPOINTS_URI`` and
``LINKSTREAM_ZK`` for ``LINKSTREAM_CLUSTER_ZK``.  ``JAVA_HOME`` (Spark's Java runtime) is
read here too, as ``[spark] java_home``.

A TOML file looks like::

    [api]
    token = "..."            # better: the environment, never a file in a repository
    [cluster]
    zk = "zk1:2181,zk2:2181/linkstream"
    zk_auth_file = "/etc/linkstream/zk-auth"   # one line user:password, mode 0600
    [checkpoints]
    uri = "s3://bucket/prefix"

A value that cannot be converted to its field's type, or an unknown key in the file, raises
:class:`ConfigError`, naming the file and the key or the variable.  Variables with the prefix
that name no setting are ignored (other tools share the prefix).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

ENV_PREFIX = "LINKSTREAM_"


def __getattr__(name: str) -> Path:
    """``LOCAL_CLUSTER_DIR``: where `linkstream cluster up` keeps a local cluster's state (its
    default --dir), in the system's temporary directory (computed on first use: importing
    ``tempfile`` costs every command ~4 ms)."""
    if name == "LOCAL_CLUSTER_DIR":
        import tempfile

        value = Path(tempfile.gettempdir()) / "linkstream-local-cluster"
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


CONFIG_ENV = "LINKSTREAM_CONFIG"

#: established variable names -> the ``LINKSTREAM_<SECTION>_<FIELD>`` they stand for
ALIASES = {
    "LINKSTREAM_CHECKPOINTS": "LINKSTREAM_CHECKPOINTS_URI",
    "LINKSTREAM_ZK": "LINKSTREAM_CLUSTER_ZK",
}


class ConfigError(ValueError):
    """A setting that cannot be read; ``str(err)`` names where it came from."""


@dataclass(frozen=True)
class ApiConfig:
    """The HTTP API.

    Attributes:
        token: Bearer token required on every route but ``/healthz`` (``LINKSTREAM_API_TOKEN``).
    """

    token: str | None = None


@dataclass(frozen=True)
class ClusterConfig:
    """Cluster membership.

    Attributes:
        zk: ZooKeeper connection string ``HOST:PORT[,HOST:PORT][/chroot]``.
        zk_auth: The cluster's ZooKeeper digest credential ``user:password``
            (``LINKSTREAM_CLUSTER_ZK_AUTH``; better than a file in a repository).
        zk_auth_file: A file holding that credential on one line
            (``LINKSTREAM_CLUSTER_ZK_AUTH_FILE``; ``--zk-auth-file`` wins over both).
        curve_keys: A ``zmq.auth`` secret certificate (``.key_secret``) with this process's
            CURVE key pair (``LINKSTREAM_CLUSTER_CURVE_KEYS``); default: a fresh pair per process.
        zk_tls_ca: PEM file of the CA that signed the ZooKeeper servers' certificates: every
            ZooKeeper connection is then TLS (``LINKSTREAM_CLUSTER_ZK_TLS_CA``; ``--zk-tls-ca``).
        zk_tls_cert: A client certificate (PEM) for servers that require one
            (``LINKSTREAM_CLUSTER_ZK_TLS_CERT``), with ``zk_tls_key``.
        zk_tls_key: Its private key (``LINKSTREAM_CLUSTER_ZK_TLS_KEY``).
        zk_connect_timeout: Seconds the one-shot commands (``status``, ``containers``,
            ``replay --zk``, ``sparql --zk``) wait for a ZooKeeper connection before their
            one-line error (``LINKSTREAM_CLUSTER_ZK_CONNECT_TIMEOUT``, default 10).  The
            long-running processes (containers, coordinators, the API) wait 30 s.
    """

    zk: str | None = None
    zk_auth: str | None = None
    zk_auth_file: str | None = None
    curve_keys: str | None = None
    zk_tls_ca: str | None = None
    zk_tls_cert: str | None = None
    zk_tls_key: str | None = None
    zk_connect_timeout: float = 10.0


@dataclass(frozen=True)
class CheckpointConfig:
    """Where checkpoints go.

    Attributes:
        uri: ``file:///path`` or ``s3://bucket/prefix``.
    """

    uri: str | None = None


@dataclass(frozen=True)
class SparkConfig:
    """The PySpark bulk loader's runtime.

    Attributes:
        java_home: Java runtime Spark starts (``JAVA_HOME``); ``None``: ``java`` on ``PATH``.
    """

    java_home: str | None = None


@dataclass(frozen=True)
class QueryConfig:
    """The query front end.

    Attributes:
        parse_cache: Directory of the parse cache (``LINKSTREAM_QUERY_PARSE_CACHE``): the
            algebra of each query text parsed by a short-lived command (``replay``,
            ``sparql``), as JSON, so that the next run of the same query skips rdflib's
            SPARQL parser.  Default ``$XDG_CACHE_HOME/linkstream/parse`` (else
            ``~/.cache/linkstream/parse``; none without a home directory); ``off`` or an
            empty value: no cache.
    """

    parse_cache: str | None = None

    def parse_cache_dir(self) -> str | None:
        """The cache directory, or ``None`` when it is off."""
        value = (self.parse_cache or "").strip()
        return None if value.lower() in ("", "off", "none", "false", "0") else value


@dataclass(frozen=True)
class Config:
    """Every LinkStream setting that is not a per-command flag."""

    api: ApiConfig = field(default_factory=ApiConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    checkpoints: CheckpointConfig = field(default_factory=CheckpointConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    query: QueryConfig = field(default_factory=QueryConfig)


#: section name -> its settings class
SECTIONS: dict[str, type] = {
    "api": ApiConfig,
    "cluster": ClusterConfig,
    "checkpoints": CheckpointConfig,
    "spark": SparkConfig,
    "query": QueryConfig,
}


def _convert(value: Any, kind: Any, where: str) -> Any:
    if value is None:
        return None
    text = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    if "int" in text and "str" not in text:
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected an integer, got {value!r}") from None
    if "float" in text and "str" not in text:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected a number, got {value!r}") from None
    if "bool" in text and "str" not in text:
        if isinstance(value, bool):
            return value
        low = str(value).strip().lower()
        if low in {"1", "true", "yes", "on"}:
            return True
        if low in {"0", "false", "no", "off", ""}:
            return False
        raise ConfigError(f"{where}: expected true/false, got {value!r}")
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string, got {value!r}")
    return value


def _section(cls: type, values: Mapping[str, Any], where: Mapping[str, str]) -> Any:
    """``cls`` built from ``values``; ``where[key]`` names each value's origin for errors."""
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(
            f"{where[unknown[0]]}: unknown setting {unknown[0]!r} (known: {', '.join(sorted(known))})"
        )
    return cls(**{k: _convert(v, known[k].type, where[k]) for k, v in values.items()})


def _env_values(env: Mapping[str, str]) -> dict[str, dict[str, tuple[str, str]]]:
    """``{section: {field: (value, variable name)}}`` of the ``LINKSTREAM_*`` variables."""
    out: dict[str, dict[str, tuple[str, str]]] = {}
    names = dict(env)
    for alias, canonical in ALIASES.items():
        if alias in names and canonical not in names:
            names[canonical] = names[alias]
    for name, value in names.items():
        if not name.startswith(ENV_PREFIX) or name == CONFIG_ENV or name in ALIASES:
            continue
        rest = name[len(ENV_PREFIX) :].lower()
        for sec, cls in SECTIONS.items():
            key = rest[len(sec) + 1 :]
            if rest.startswith(sec + "_") and key in {f.name for f in dataclasses.fields(cls)}:
                out.setdefault(sec, {})[key] = (value, name)
                break
        else:
            # other tools share the prefix (the test suite's LINKSTREAM_SHARED): said, not fatal
            logger.debug("ignoring %s: not a LinkStream setting", name)
    if env.get("JAVA_HOME"):
        out.setdefault("spark", {}).setdefault("java_home", (env["JAVA_HOME"], "JAVA_HOME"))
    return out


def default_parse_cache(env: Mapping[str, str]) -> str | None:
    """``$XDG_CACHE_HOME/linkstream/parse``, else ``~/.cache/linkstream/parse`` (None: no home)."""
    root = env.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(root):  # the XDG rule: a relative value is ignored
        home = env.get("HOME") or ""
        if not home:
            return None
        root = os.path.join(home, ".cache")
    return os.path.join(root, "linkstream", "parse")


def load(path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Reads the settings.

    Args:
        path: TOML file; default ``$LINKSTREAM_CONFIG`` if set, else none.
        env: Environment to read (default ``os.environ``); tests pass their own.

    Returns:
        The settings, defaults < file < environment.

    Raises:
        ConfigError: The file is missing or malformed, or a value has the wrong type.
    """
    env = os.environ if env is None else env
    path = path or env.get(CONFIG_ENV) or None
    merged: dict[str, dict[str, Any]] = {}
    where: dict[str, dict[str, str]] = {}
    if path:
        import tomllib  # (only with a file: a short command's start-up skips it)

        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise ConfigError(f"{path}: cannot read the config file ({e.strerror or e})") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: not valid TOML ({e})") from None
        for sec, values in data.items():
            if sec not in SECTIONS:
                raise ConfigError(f"{path}: unknown section {sec!r} (known: {', '.join(SECTIONS)})")
            if not isinstance(values, dict):
                raise ConfigError(f"{path}: [{sec}] must be a table")
            merged[sec] = dict(values)
            where[sec] = {k: f"{path} [{sec}] {k}" for k in values}
    for sec, env_values in _env_values(env).items():
        for key, (value, name) in env_values.items():
            merged.setdefault(sec, {})[key] = value
            where.setdefault(sec, {})[key] = name
    default_cache = default_parse_cache(env)
    if default_cache is not None and "parse_cache" not in merged.get("query", {}):
        merged.setdefault("query", {})["parse_cache"] = default_cache
        where.setdefault("query", {})["parse_cache"] = "the default parse cache"
    return Config(
        **{sec: _section(cls, merged.get(sec, {}), where.get(sec, {})) for sec, cls in SECTIONS.items()}
    )


def set_default_environment(**settings: str) -> None:
    """Sets variables that libraries we start in-process read (PySpark, numpy's OpenBLAS),
    unless already set."""
    for k, v in settings.items():
        os.environ.setdefault(k, v)
