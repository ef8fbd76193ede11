"""``linkstream demo --cluster N`` (``make cluster-demo``): the bundled CityBench slice
through the HTTP API of a local cluster reports what the embedded demo reports."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from linkstream.cli import main as cli_main

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

REPO = Path(__file__).resolve().parents[2]


def test_cluster_demo_reports_what_the_embedded_demo_reports(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["demo", "--rows", "0"]) == 0
    embedded = capsys.readouterr().out
    assert cli_main(["demo", "--cluster", "1", "--rows", "0"]) == 0
    cluster = capsys.readouterr().out
    # per query: its report times, rows and non-empty reports
    summary = [ln for ln in embedded.splitlines() if ln.startswith("== ")]
    assert len(summary) == 4 and all(" 0 rows" not in ln for ln in summary)
    assert [ln for ln in cluster.splitlines() if ln.startswith("== ")] == summary
    assert "2 coordinators serving the HTTP API and 1 operator container(s)" in cluster
    assert re.search(r"through the API of 1 container\(s\) .* 641 result rows", cluster), cluster
    assert "641 result rows" in embedded


def test_make_cluster_demo_runs_the_cluster_demo() -> None:
    # --no-print-directory: under `make test` MAKEFLAGS carries -w, which would end the
    # output with "make[1]: Leaving directory ..."
    dry = subprocess.run(
        ["make", "--no-print-directory", "-n", "cluster-demo"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert dry.stdout.strip().splitlines()[-1].endswith("linkstream demo --cluster 3")
