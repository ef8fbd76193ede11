"""Fast-path transport: one-sided reads of remote memory regions.

:mod:`.regions` is the protocol and registry; :mod:`.verbs` reads with RDMA (pyverbs,
needs an RDMA device), :mod:`.shm` with shared memory between processes of one host,
:mod:`.tcp` with ZeroMQ as the fallback.  ``best_transport`` picks among them.
"""
