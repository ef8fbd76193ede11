"""``linkstream run`` refuses bad flags with one line on stderr and exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkstream.cli import main as cli_main


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--token", ""], "empty token"),
        (["--token", "a:write:"], "empty token"),
        (["--token", "x:read:same", "--token", "y:write:same"], "share a secret"),
        (["--port", "99999"], "--port"),
        (["--port", "http"], "--port"),
        (["--tls-cert", "/no/such.pem", "--tls-key", "/no/such.key"], "--tls-cert"),
        (["--tls-cert", "/etc/hostname"], "go together"),
        (["--tokens-file", "/no/such.json"], "--tokens-file"),
        (["--max-body-bytes", "0"], "--max-body-bytes"),
        (["--compile-seconds", "-1"], "--compile-seconds"),
        (["--max-connections", "many"], "--max-connections"),
        (["--dictionary", "lmdb:/proc/no/such/dir"], "No such file"),
        (["--store", "/proc/no/such/dir"], "No such file"),
    ],
)
def test_bad_run_flags(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = cli_main(["run", "--port", "0", *argv])
    except SystemExit as e:  # argparse type errors
        code = e.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and says in err, err


def test_tokens_file_entries_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "tokens.json"
    f.write_text('[{"name": "a", "scope": "root", "secret": "s3cret-1"}]')
    assert cli_main(["run", "--tokens-file", str(f)]) == 2
    assert "scope must be one of read, write, admin" in capsys.readouterr().err
