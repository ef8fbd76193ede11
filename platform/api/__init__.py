"""The HTTP API (layer: above ``engine``; below ``cluster`` and ``cli``).

* ``app.py``          -- the Starlette ASGI application around a live engine: queries, stream
  pushes, SSE/JSONL results, one-shot ``/sparql``, ``/metrics``, ``/healthz``.
* ``results.py``      -- the result streams (SSE with ``id:`` / ``Last-Event-ID``, JSON Lines with
  ``?after=``) and their count against ``max_subscribers``.
* ``tokens.py``       -- which token registered which query (``max_queries_per_token``, who may
  remove it).
* ``compiling.py``    -- query texts parsed under the limits (size, compile time, parses at once),
  one by one or a batch in one thread.
* ``errors.py``       -- :class:`ApiError`, the JSON error answers and the exception handlers.
* ``auth.py`` / ``guard.py`` / ``limits.py`` -- bearer tokens and scopes, the middleware that
  checks them and body limits, the request limits.
* ``backend.py``      -- what the app needs of its engine (a live engine or a cluster coordinator).
* ``bodies.py``       -- stream element bodies of ``POST /streams`` (N-Triples, N-Quads, Turtle,
  JSON-LD).
* ``openapi.py``      -- the OpenAPI 3.1 description served at ``/openapi.json``.
* ``server.py``       -- serving the app with uvicorn, in the foreground or in a thread.
* ``client.py``       -- the Python client of the API.

The command-line side (``linkstream run``, ``linkstream queries``) lives in ``cli/service.py``.
"""
