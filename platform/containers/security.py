"""Cluster security of one process: its ZooKeeper credential and its CURVE key pair.

On by default.  Every cluster process (coordinator, container, ``replay --zk`` driver,
``status``, ``containers add|remove``) holds one :class:`Security`:

* **ZooKeeper**: the cluster's digest credential (:class:`~linkstream.scheduler.zkclient.ZkAuth`);
  its clients authenticate with it and every node they create is private to it
  (:func:`~linkstream.scheduler.zkclient.make_client`).
* **ZooKeeper TLS** (optional, :class:`~linkstream.scheduler.zkclient.ZkTls`): with
  ``--zk-tls-ca`` every ZooKeeper connection is encrypted and the server's certificate
  verified; a local cluster's own ZooKeeper serves TLS only.
* **ZeroMQ**: a CURVE key pair, fresh per process unless ``[cluster] curve_keys`` names a
  certificate.  Every socket a process binds is a CURVE server whose ZAP handler admits
  only the public keys published in ZooKeeper (:class:`~linkstream.scheduler.keyring.KeyRing`);
  every socket it connects is a CURVE client holding the server's published public key.
  The secret key never leaves the process.

:meth:`Security.insecure` (``--insecure``) turns both off: open ACLs, plaintext sockets.
:func:`resolve` is how the command line chooses: a credential from ``--zk-auth-file``,
``LINKSTREAM_CLUSTER_ZK_AUTH`` or ``LINKSTREAM_CLUSTER_ZK_AUTH_FILE``, else ``--insecure``,
else it refuses with one line saying how to get a credential.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kazoo.client import KazooClient

from linkstream.containers.transport import CurveKeys
from linkstream.scheduler.keyring import KeyRing
from linkstream.scheduler.layout import DEFAULT_ROOT
from linkstream.scheduler.zkclient import CREDENTIALS_HINT, ZkAuth, ZkAuthError, ZkTls, connect, make_client


class SecurityError(ValueError):
    """Security cannot be set up as asked (``str(err)`` is one line for the user)."""


@dataclass(frozen=True)
class Security:
    """What one process needs to take part in a (secure or insecure) cluster.

    Attributes:
        zk_auth: The cluster's ZooKeeper credential; ``None``: insecure (and no CURVE).
        public: This process's CURVE public key (Z85), with ``zk_auth``.
        secret: Its secret key (never published, never logged).
        zk_tls: TLS to ZooKeeper, or ``None`` (plaintext connection).
    """

    zk_auth: ZkAuth | None = None
    public: bytes | None = None
    secret: bytes | None = field(default=None, repr=False)
    zk_tls: ZkTls | None = None

    @classmethod
    def insecure(cls) -> Security:
        """Open ACLs, no ZooKeeper authentication, plaintext ZeroMQ (``--insecure``)."""
        return cls()

    @classmethod
    def secure(
        cls, zk_auth: ZkAuth, keypair: tuple[bytes, bytes] | None = None, zk_tls: ZkTls | None = None
    ) -> Security:
        """``zk_auth`` with ``keypair`` (``(public, secret)``; default: a fresh one)."""
        public, secret = keypair if keypair is not None else CurveKeys.keypair()
        return cls(zk_auth, public, secret, zk_tls)

    @property
    def enabled(self) -> bool:
        """Whether this process authenticates and encrypts."""
        return self.zk_auth is not None

    @property
    def public_text(self) -> str:
        """The public key as published (``""`` when insecure)."""
        return "" if self.public is None else self.public.decode("ascii")

    def with_fresh_keys(self) -> Security:
        """The same credential with a new CURVE key pair (one per process)."""
        return self if self.zk_auth is None else Security.secure(self.zk_auth, zk_tls=self.zk_tls)

    # ------------------------------------------------------------------ ZooKeeper

    def kazoo(self, hosts: str, timeout: float = 10.0) -> KazooClient:
        """A kazoo client (not started) with this credential and ACL."""
        return make_client(hosts, self.zk_auth, timeout, self.zk_tls)

    def connect(self, hosts: str, timeout: float = 10.0, start_timeout: float = 30.0) -> KazooClient:
        """A started kazoo client with this credential and ACL.

        Args:
            hosts: ZooKeeper connection string.
            timeout: Session timeout in seconds.
            start_timeout: Seconds to wait for the connection (``KazooTimeoutError`` after).
        """
        return connect(hosts, self.zk_auth, timeout, start_timeout, tls=self.zk_tls)

    # ------------------------------------------------------------------ ZeroMQ

    def server(
        self, client: KazooClient, root: str = DEFAULT_ROOT, on_reject: Callable[[str], None] | None = None
    ) -> CurveKeys | None:
        """Keys of a bound socket admitting the cluster's published keys (``None``: plaintext).

        Args:
            client: The process's started kazoo client (reads the keys at each handshake).
            root: Cluster root inside the chroot.
            on_reject: Counts refused handshakes (``ProcessMetrics.on_reject``).
        """
        if self.public is None or self.secret is None:
            return None
        ring = KeyRing(client, root, extra=(self.public,))
        return CurveKeys(self.public, self.secret, authorized_clients=ring, on_reject=on_reject)

    def client(self, server_public: str | bytes | None, peer: str = "the peer") -> CurveKeys | None:
        """Keys of a socket connecting to a server with public key ``server_public``.

        Raises:
            SecurityError: This process is secure but ``peer`` published no key (an
                insecure process in a secure cluster).
        """
        if self.public is None or self.secret is None:
            return None
        if isinstance(server_public, str):
            server_public = server_public.encode("ascii")
        if not server_public:
            raise SecurityError(
                f"{peer} published no CURVE public key: it runs with --insecure, or an older "
                "version, in a secure cluster"
            )
        return CurveKeys(self.public, self.secret, server_public=server_public)


def resolve(
    *,
    auth_file: str | None = None,
    insecure: bool = False,
    env_auth: str | None = None,
    env_auth_file: str | None = None,
    curve_keys: str | None = None,
    zk_tls_ca: str | None = None,
    zk_tls_cert: str | None = None,
    zk_tls_key: str | None = None,
) -> Security:
    """The security a command-line process runs with.

    Args:
        auth_file: ``--zk-auth-file`` (wins over the environment).
        insecure: ``--insecure``: no credential needed, none used.
        env_auth: ``[cluster] zk_auth`` (``LINKSTREAM_CLUSTER_ZK_AUTH``).
        env_auth_file: ``[cluster] zk_auth_file`` (``LINKSTREAM_CLUSTER_ZK_AUTH_FILE``).
        curve_keys: ``[cluster] curve_keys``: a ``zmq.auth`` secret certificate.
        zk_tls_ca: ``--zk-tls-ca`` / ``[cluster] zk_tls_ca``: encrypt ZooKeeper connections,
            verifying the server against this CA file.
        zk_tls_cert: ``[cluster] zk_tls_cert``: a client certificate to present (with ``zk_tls_key``).
        zk_tls_key: ``[cluster] zk_tls_key``: its private key.

    Raises:
        SecurityError: No credential and not ``insecure``, both given, or a credential or
            certificate that cannot be read; the message is one line.
    """
    if insecure:
        if auth_file:
            raise SecurityError("--insecure and --zk-auth-file contradict each other: give one")
        return Security.insecure()
    try:
        tls = ZkTls.from_files(zk_tls_ca, zk_tls_cert, zk_tls_key) if zk_tls_ca else None
        if (zk_tls_cert or zk_tls_key) and tls is None:
            raise SecurityError("a ZooKeeper TLS client certificate needs --zk-tls-ca (the server's CA)")
        if auth_file:
            auth = ZkAuth.from_file(auth_file)
        elif env_auth:
            auth = ZkAuth.parse(env_auth, "LINKSTREAM_CLUSTER_ZK_AUTH")
        elif env_auth_file:
            auth = ZkAuth.from_file(env_auth_file)
        else:
            raise SecurityError(CREDENTIALS_HINT)
    except ZkAuthError as e:
        raise SecurityError(str(e)) from None
    keypair = None
    if curve_keys:
        try:
            keys = CurveKeys.from_files(curve_keys)
        except (OSError, ValueError) as e:
            raise SecurityError(f"{curve_keys}: cannot read the CURVE certificate ({e})") from None
        keypair = (keys.public, keys.secret)
    return Security.secure(auth, keypair, tls)
