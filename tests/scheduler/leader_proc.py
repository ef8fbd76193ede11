"""A coordinator stand-in run as a separate process, so a test can SIGKILL a leader.

Usage: ``python leader_proc.py HOSTS_WITH_CHROOT IDENTIFIER SESSION_TIMEOUT``.  Prints
``LEADER`` once elected and then waits to be killed.
"""

from __future__ import annotations

import sys
import threading

from kazoo.client import KazooClient

from linkstream.scheduler.election import LeaderElection


def main() -> None:
    hosts, identifier, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
    client = KazooClient(hosts=hosts, timeout=timeout)
    client.start(timeout=10)
    elected = threading.Event()
    election = LeaderElection(client, identifier, on_elected=elected.set)
    election.start()
    elected.wait()
    sys.stdout.write("LEADER\n")
    sys.stdout.flush()
    threading.Event().wait()


if __name__ == "__main__":
    main()
