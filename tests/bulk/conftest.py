"""A real Spark ``local[2]`` session, one per test session (starting one takes 5-10 s)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from linkstream.bulk.session import java_available


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """SparkSession on ``local[2]`` (UI off, loopback); skipped only when no Java runtime exists."""
    if not java_available():
        pytest.skip("no Java runtime (java on PATH or JAVA_HOME): Spark cannot start")
    from linkstream.bulk.session import spark_session

    session = spark_session(
        "local[2]",
        app_name="linkstream-tests",
        shuffle_partitions=4,
        driver_memory="2g",
    )
    yield session
    session.stop()
