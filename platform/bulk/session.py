"""Starting the SparkSession the bulk loader runs in.

PySpark starts a JVM (found through ``JAVA_HOME`` or ``java`` on ``PATH``) and Python
workers.  The workers must run the interpreter that has LinkStream installed, so
``PYSPARK_PYTHON`` defaults to this process's interpreter; in local mode the driver
binds the loopback address (``SPARK_LOCAL_IP=127.0.0.1``) unless told otherwise.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING

from linkstream.config import load as load_config
from linkstream.config import set_default_environment

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[2]"


class SparkUnavailable(RuntimeError):
    """PySpark or a Java runtime is missing; ``str(err)`` says which and how to fix it."""


def java_available() -> bool:
    """Whether a Java runtime can be found (``JAVA_HOME`` or ``java`` on ``PATH``)."""
    home = load_config().spark.java_home
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return True
    return shutil.which("java") is not None


def spark_session(
    master: str = DEFAULT_MASTER,
    *,
    app_name: str = "linkstream-load",
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """Get (or create) the SparkSession for bulk loading.

    Args:
        master: Spark master URL (``local[N]``, ``spark://HOST:PORT``, ``yarn`` ...).
        app_name: application name shown by the cluster manager.
        shuffle_partitions: ``spark.sql.shuffle.partitions`` (default: 4 per local core, else 64).
        driver_memory: ``spark.driver.memory`` (only effective when this call starts the JVM).
        conf: more Spark settings.

    Raises:
        SparkUnavailable: PySpark is not installed or no Java runtime is found.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise SparkUnavailable(
            "PySpark is not installed: pip install 'linkstream[spark]' (or pip install pyspark pyarrow)"
        ) from e
    if not java_available():
        raise SparkUnavailable("Spark needs a Java runtime (17 or later): none on PATH and no JAVA_HOME")
    set_default_environment(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    if master.startswith("local"):
        set_default_environment(SPARK_LOCAL_IP="127.0.0.1")
    if shuffle_partitions is None:
        shuffle_partitions = 4 * _local_cores(master) if master.startswith("local") else 64
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "65536")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.python.worker.reuse", "true")
        .config("spark.ui.showConsoleProgress", "false")
        # 32 MB splits: several parse tasks per core even for a few big files
        .config("spark.sql.files.maxPartitionBytes", str(32 << 20))
    )
    if master.startswith("local"):
        # several parse tasks per core even for a few files: uneven files balance out
        builder = builder.config("spark.sql.files.minPartitionNum", str(4 * _local_cores(master)))
    if driver_memory:
        builder = builder.config("spark.driver.memory", driver_memory)
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _local_cores(master: str) -> int:
    """Cores of a ``local[N]`` / ``local[*]`` / ``local`` master."""
    if "[" not in master:
        return 1
    n = master[master.index("[") + 1 : master.index("]")].split(",")[0]
    return (os.cpu_count() or 2) if n == "*" else max(1, int(n))
