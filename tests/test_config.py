"""The settings tree (``linkstream.config``): defaults < TOML file < ``LINKSTREAM_*`` environment."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from linkstream.config import Config, ConfigError, load

PLATFORM = Path(__file__).resolve().parent.parent / "platform"


def test_defaults_without_file_or_environment():
    assert load(env={}) == Config()


def test_environment_names_section_and_field():
    cfg = load(env={"LINKSTREAM_API_TOKEN": "s3cret", "LINKSTREAM_CLUSTER_ZK": "zk:2181/ls"})
    assert cfg.api.token == "s3cret"
    assert cfg.cluster.zk == "zk:2181/ls"


def test_established_aliases_and_java_home():
    cfg = load(env={"LINKSTREAM_CHECKPOINTS": "s3://b/p", "LINKSTREAM_ZK": "h:1", "JAVA_HOME": "/opt/java"})
    assert cfg.checkpoints.uri == "s3://b/p"
    assert cfg.cluster.zk == "h:1"
    assert cfg.spark.java_home == "/opt/java"


def test_environment_overrides_the_file(tmp_path):
    f = tmp_path / "ls.toml"
    f.write_text('[api]\ntoken = "from-file"\n[cluster]\nzk = "file:1"\n', encoding="utf-8")
    cfg = load(f, env={"LINKSTREAM_API_TOKEN": "from-env"})
    assert cfg.api.token == "from-env"
    assert cfg.cluster.zk == "file:1"
    assert load(env={"LINKSTREAM_CONFIG": str(f)}).cluster.zk == "file:1"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[api]\ntokn = 'x'\n", "unknown setting 'tokn'"),
        ("[nope]\na = 1\n", "unknown section 'nope'"),
        ("[api]\ntoken = 3\n", "[api] token: expected a string"),
        ("[api\n", "not valid TOML"),
        ("api = 1\n", "[api] must be a table"),
    ],
)
def test_bad_files_name_the_problem(tmp_path, text, needle):
    f = tmp_path / "bad.toml"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=None) as e:
        load(f, env={})
    assert needle in str(e.value)
    assert str(f) in str(e.value)


def test_missing_file_and_foreign_variables(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the config file"):
        load(tmp_path / "missing.toml", env={})
    # variables that share the prefix but name no setting are left to whoever uses them
    assert load(env={"LINKSTREAM_API_TOKNE": "x", "LINKSTREAM_SHARED": "/srv/shared"}) == Config()


def test_config_is_the_only_reader_of_the_environment():
    """No module but ``config.py`` reads ``os.environ`` / ``os.getenv`` (ast, not grep: comments don't count)."""
    offenders = []
    for f in sorted(PLATFORM.rglob("*.py")):
        if f.name == "config.py" and f.parent == PLATFORM:
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv", "environb"}:
                if isinstance(node.value, ast.Name) and node.value.id == "os":
                    offenders.append(f"{f.relative_to(PLATFORM)}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and node.module == "os":
                if any(a.name in {"environ", "getenv"} for a in node.names):
                    offenders.append(f"{f.relative_to(PLATFORM)}:{node.lineno}")
    assert offenders == []
