# Types of the compiled N-Triples / N-Quads scanner (platform/rdf/_ntparse.c).
def scan(
    buf: bytes | bytearray | memoryview,
    pos: int,
    prefix: bytes,
    graphs: bool,
    langs: dict[str, str],
    ids: dict[str, int] | None,
    terms: list[str | None] | None,
) -> tuple[list[str] | None, bytes, int, int, bool]: ...
