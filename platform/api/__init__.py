"""The HTTP API (layer: above ``engine``; below ``cluster`` and ``cli``).

* ``app.py``          -- the Starlette ASGI application around a live engine: queries, stream
  pushes, SSE/JSONL results, one-shot ``/sparql``, ``/metrics``, ``/healthz``.
* ``bodies.py``       -- stream element bodies of ``POST /streams`` (N-Triples, N-Quads, Turtle,
  JSON-LD).
* ``openapi.py``      -- the OpenAPI 3.1 description served at ``/openapi.json``.
* ``server.py``       -- serving the app with uvicorn, in the foreground or in a thread.
* ``client.py``       -- the Python client of the API.

The command-line side (``linkstream run``, ``linkstream queries``) lives in ``cli/service.py``.
"""
