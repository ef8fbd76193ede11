"""The live engine: a thread-safe runtime around the embedded engine, for servers.

* ``runtime.py``      -- :class:`LiveEngine`, the public face (register, push, subscribe, query).
* ``worker.py``       -- the worker thread: command loop, ingestion, report scheduling, ticks.
* ``state.py``        -- state records: errors, per-query and per-stream bookkeeping.
* ``subscription.py`` -- result subscriptions: a bounded queue of one query's reports.
* ``ingestlog.py``    -- the durable ingest log of ``run --state-dir`` (group commit, CRC per record).
* ``checkpoint.py``   -- barrier checkpoints of the engine state (``--checkpoint-interval``).
* ``ringcheckpoint.py`` -- the result rings in checkpoints, written incrementally.
* ``recovery.py``     -- restart: restore the latest checkpoint, replay the log after it.
"""
