"""README's "Run a cluster" runs as written: its five commands, from an empty directory to
result lines, equal the embedded replay of the same query over the same stream file.

The commands are taken from the README's code block; only the local cluster's directory is
changed (``--dir``, and the path of its ``api.env``) so that the test owns its cluster.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from linkstream.cli import main as cli_main
from linkstream.rdf.streams import parse_datetime_ms

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIR = "/tmp/linkstream-local-cluster"


def readme_commands() -> list[str]:
    """The shell commands of the README's "Run a cluster" block (continuation lines joined,
    comments dropped)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### Run a cluster") :]
    block = section[section.index("```sh\n") + 6 :]
    block = block[: block.index("```")]
    lines = (re.sub(r"\s+#\s.*$", "", c).strip() for c in block.replace("\\\n", " ").splitlines())
    return [c for c in lines if c]


def canon(line: str) -> str:
    return json.dumps(json.loads(line), sort_keys=True)


def test_readme_run_a_cluster_in_five_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commands = readme_commands()
    assert len(commands) == 5, commands
    state, results = tmp_path / "lc", tmp_path / "results.jsonl"
    start, source, add, subscribe, push = (c.replace(DEFAULT_DIR, str(state)) for c in commands)
    assert start.startswith("infra/local-cluster start ") and source == f". {state}/api.env"
    assert subscribe.endswith(" &")
    subscribe = subscribe[:-1] + f"> {results} 2>&1 &"
    env = {
        **os.environ,
        "LINKSTREAM_PYTHON": sys.executable,
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
    }
    env.pop("LINKSTREAM_API_TOKEN", None)
    first = subprocess.run(
        ["bash", "-euc", f"{start} --dir {state}\n{source}\n{add}\n{subscribe}\necho $!"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    reader = None
    try:
        assert first.returncode == 0, first.stdout + first.stderr
        assert re.search(r"^token: \S+", first.stdout, re.M) and "api: http://" in first.stdout
        reader = int(first.stdout.strip().splitlines()[-1])
        api = dict(
            line.removeprefix("export ").split("=", 1)
            for line in (state / "api.env").read_text().splitlines()
        )
        headers = {"Authorization": "Bearer " + api["LINKSTREAM_API_TOKEN"]}
        # the reader is open on the coordinator $API names, which may be a standby: its own
        # /status counts it (GET /queries/{name} is answered by the leader, whose count
        # holds only the leader's own subscribers)
        status = httpx.get(api["API"] + "/status", headers=headers, timeout=10).json()
        deadline = time.monotonic() + 60
        while status["subscribers"] < 1:  # a person types the next command later than this
            assert time.monotonic() < deadline, status
            time.sleep(0.1)
            status = httpx.get(api["API"] + "/status", headers=headers, timeout=10).json()
        pushed = subprocess.run(
            ["bash", "-euc", f"{source}\n{push}"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert pushed.returncode == 0, pushed.stderr
        answer = json.loads(pushed.stdout)
        assert answer["elements"] == 30 and answer["late"] == 0, answer
        # every report up to the last element's time fires: wait until the lines stop growing
        got: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            time.sleep(1.0)
            now = results.read_text().splitlines() if results.exists() else []
            if now and now == got:
                break
            got = now
    finally:
        if reader is not None:
            try:
                os.kill(reader, 15)
            except ProcessLookupError:
                pass
        subprocess.run(
            [str(REPO / "infra" / "local-cluster"), "stop", "--dir", str(state)], env=env, check=False
        )
    # the embedded replay of the same query over the same file, up to the same report time
    stream = re.search(r'"\$API/streams/([^"]+)"', push)
    data = re.search(r"--data-binary @(\S+)", push)
    static = re.search(r"--static (\S+)", start)
    assert stream and data and static
    iri = stream.group(1).replace("%23", "#")
    expected = tmp_path / "embedded.jsonl"
    argv = ["replay", "--query", str(REPO / add.split()[3]), "--stream", f"{iri}={REPO / data.group(1)}"]
    argv += ["--static", str(REPO / static.group(1)), "--out", str(expected), "--quiet"]
    assert cli_main(argv) == 0, capsys.readouterr().err
    # the stream's watermark is its latest element: every report time up to it fired
    stamps = re.findall(r'generatedAtTime> "([^"]+)"', (REPO / data.group(1)).read_text())
    last = max(parse_datetime_ms(x) for x in stamps)
    want = Counter(canon(x) for x in expected.read_text().splitlines() if json.loads(x)["t"] <= last)
    assert len(got) > 50 and Counter(canon(x) for x in got) == want
