"""Structure and validity of the Terraform deployment in ``terraform/``.

``terraform validate`` and ``terraform test`` (``terraform/tests/*.tftest.hcl``: a mocked
AWS provider plans the dev and prod examples, ``terraform/examples/*.tfvars``, and asserts
EFA + cluster placement group, no 0.0.0.0/0 ingress, S3 encryption and versioning, IAM
least privilege, the drain lifecycle hook, coordinators behind a load balancer) run with
the offline AWS provider where this machine has it (INFRA.md); they are skipped, with
that reason, where terraform or the provider is missing.  The structure tests parse the
HCL with python-hcl2 and also check that every ``LINKSTREAM_*`` setting the node
templates write is one the code reads (``platform/config.py``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import hcl2
import pytest
from hcl2 import SerializationOptions

from linkstream.config import load as load_config

TF_DIR = Path(__file__).resolve().parents[2] / "terraform"
PLUGIN_DIR = Path("/opt/tf-plugins")
_OPTS = SerializationOptions(strip_string_quotes=True, explicit_blocks=False)


def _parse_all() -> dict[str, list]:
    merged: dict[str, list] = {}
    for f in sorted(TF_DIR.glob("*.tf")):
        with f.open() as fh:
            for key, blocks in hcl2.load(fh, serialization_options=_OPTS).items():
                merged.setdefault(key, []).extend(blocks)
    return merged


def _resources(kind: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for block in _parse_all().get("resource", []):
        out.update(block.get(kind, {}))
    return out


def _variables() -> dict[str, dict]:
    out: dict[str, dict] = {}
    for block in _parse_all().get("variable", []):
        out.update(block)
    return out


def _one(block: object) -> dict:
    """A nested block as python-hcl2 returns it (a list of one dict)."""
    return block[0] if isinstance(block, list) else block  # type: ignore[return-value]


def test_container_pool_uses_efa_in_a_cluster_placement_group():
    pg = _resources("aws_placement_group")["rdma"]
    assert pg["strategy"] == "cluster"
    lt = _resources("aws_launch_template")["container"]
    nic = _one(lt["network_interfaces"])
    assert nic["interface_type"] == "efa"
    assert "aws_placement_group.rdma" in _one(lt["placement"])["group_name"]
    asg = _resources("aws_autoscaling_group")["containers"]
    assert "aws_placement_group.rdma" in asg["placement_group"]
    assert "aws_launch_template.container" in _one(asg["launch_template"])["id"]
    assert "var.containers_max" in str(asg["max_size"])
    # one subnet, one zone: EFA traffic does not cross zones
    assert len(asg["vpc_zone_identifier"]) == 1


def test_containers_autoscale_and_drain_before_termination():
    pol = _resources("aws_autoscaling_policy")["containers_cpu"]
    assert pol["policy_type"] == "TargetTrackingScaling"
    assert 'var.container_autoscaler == "cpu"' in str(pol["count"])
    hook = _one(_resources("aws_autoscaling_group")["containers"]["initial_lifecycle_hook"])
    assert hook["name"] == "drain"  # what `linkstream autoscaler --hook` completes
    assert hook["lifecycle_transition"] == "autoscaling:EC2_INSTANCE_TERMINATING"
    assert int(hook["heartbeat_timeout"]) >= 60


def test_zookeeper_ensemble_is_odd_and_addressed_up_front():
    var = _variables()["zookeeper_nodes"]
    assert "contains([1, 3, 5]" in str(var["validation"])
    zk = _resources("aws_instance")["zookeeper"]
    assert "local.zk_ips" in zk["private_ip"]
    template = (TF_DIR / "templates" / "zookeeper.sh.tftpl").read_text()
    assert "server.${i + 1}=${ip}:2888:3888" in template
    assert "admin.enableServer=false" in template


def test_every_process_is_pointed_at_the_ensemble_with_a_chroot():
    cmds = []
    for res in (_resources("aws_instance")["coordinator"], _resources("aws_launch_template")["container"]):
        cmds.append(res["user_data"])
    for c in cmds:
        assert "--zk ${local.zk_connect}${local.zk_chroot}" in c
    assert "linkstream container" in cmds[1] and "linkstream run --zk" in cmds[0]


def test_checkpoint_bucket_is_private_encrypted_and_versioned():
    pab = _resources("aws_s3_bucket_public_access_block")["checkpoints"]
    for flag in ("block_public_acls", "block_public_policy", "ignore_public_acls", "restrict_public_buckets"):
        assert pab[flag] is True
    sse = _resources("aws_s3_bucket_server_side_encryption_configuration")["checkpoints"]
    assert "aws:kms" in json.dumps(sse)
    ver = _resources("aws_s3_bucket_versioning")["checkpoints"]
    assert _one(ver["versioning_configuration"])["status"] == "Enabled"


def test_nodes_require_imdsv2_and_encrypted_disks():
    for name, res in _resources("aws_instance").items():
        assert _one(res["metadata_options"])["http_tokens"] == "required", name
        assert _one(res["root_block_device"])["encrypted"] is True, name
    lt = _resources("aws_launch_template")["container"]
    assert _one(lt["metadata_options"])["http_tokens"] == "required"


def test_admin_ports_are_closed_unless_cidrs_are_given():
    sg = _resources("aws_security_group")["admin"]
    assert "length(var.admin_cidrs) > 0" in json.dumps(sg)
    cluster = _resources("aws_security_group")["cluster"]
    assert "0.0.0.0/0" not in json.dumps(cluster.get("ingress"))


def test_no_credentials_in_the_deployment_files():
    pattern = re.compile(r"(AKIA[0-9A-Z]{16}|aws_secret_access_key|secret_key\s*=|password\s*=)", re.I)
    for f in TF_DIR.rglob("*"):
        if f.is_file() and ".terraform" not in f.parts:
            assert not pattern.search(f.read_text()), f


def test_every_variable_is_described_and_typed():
    for name, var in _variables().items():
        assert var.get("description"), name
        assert var.get("type"), name


def test_settings_in_the_node_templates_are_read_by_the_code():
    template = (TF_DIR / "templates" / "linkstream.sh.tftpl").read_text()
    names = set(re.findall(r"\b(LINKSTREAM_[A-Z_]+)=", template))
    assert names == {"LINKSTREAM_API_TOKEN", "LINKSTREAM_CHECKPOINTS_URI", "LINKSTREAM_CLUSTER_ZK_AUTH"}
    config = load_config(
        env={
            "LINKSTREAM_API_TOKEN": "t",
            "LINKSTREAM_CHECKPOINTS_URI": "s3://b/checkpoints",
            "LINKSTREAM_CLUSTER_ZK_AUTH": "u:p",
        }
    )
    assert config.api.token == "t" and config.checkpoints.uri == "s3://b/checkpoints"
    assert config.cluster.zk_auth == "u:p"
    # the coordinators here keep no --state-dir: say who reads the checkpoint location
    assert "run --state-dir" in template and "restore" in template
    assert "upcoming checkpoint" not in template and "nothing writes checkpoints" not in template
    # containers advertise what they bind: never the wildcard address
    container = _resources("aws_launch_template")["container"]["user_data"]
    assert "--bind tcp://$PRIVATE_IP:*" in container and "0.0.0.0" not in container
    coordinator = _resources("aws_instance")["coordinator"]["user_data"]
    # one process per coordinator: `run --zk` is the coordinator and serves the API (any
    # coordinator answers); no separate embedded `linkstream run` next to it
    assert "--host $PRIVATE_IP --port ${local.api_port}" in coordinator
    assert coordinator.count("/opt/linkstream/bin/linkstream run ") == 1, coordinator
    assert "linkstream coordinator" not in coordinator
    # the optional load-driven autoscaler (container_autoscaler = "linkstream") on the group
    assert "linkstream autoscaler --zk ${local.zk_connect}${local.zk_chroot}" in coordinator
    assert (
        "--autoscale-driver aws --group ${aws_autoscaling_group.containers.name} --hook drain" in coordinator
    )
    assert "--id $INSTANCE_ID" in container


def _set_variables() -> dict[str, str]:
    """Every ``LINKSTREAM_*`` variable a file under terraform/ sets (shell ``NAME=``, a
    ``printf 'NAME=%s'``, a systemd ``Environment=NAME=``, an HCL ``NAME = ``): name -> file."""
    found: dict[str, str] = {}
    for f in sorted(TF_DIR.rglob("*")):
        if f.suffix not in (".tf", ".tftpl", ".sh", ".hcl", ".tfvars", ".example") or "/tests/" in str(f):
            continue
        for name in re.findall(r"\b(LINKSTREAM_[A-Z0-9_]+)\s*=", f.read_text()):
            found.setdefault(name, f.name)
    return found


def test_every_variable_terraform_sets_is_a_setting_the_code_reads():
    from linkstream import config

    found = _set_variables()
    assert found, "no LINKSTREAM_* variable found: the scan is broken"
    sections = {f.name: f.type for f in dataclasses.fields(config.Config)}
    for name, where in found.items():
        full = config.ALIASES.get(name, name)
        rest = full.removeprefix(config.ENV_PREFIX).lower()
        section = next((s for s in sections if rest.startswith(s + "_")), None)
        assert section is not None, f"{where}: {name} names no section of platform/config.py"
        key = rest[len(section) + 1 :]
        cls = getattr(config, str(sections[section]).rsplit(".", 1)[-1])
        assert key in {f.name for f in dataclasses.fields(cls)}, (
            f"{where}: {name} names no [{section}] setting"
        )
        # and load() takes it from the environment (a sample value of the field's type)
        sample = "7" if cls.__dataclass_fields__[key].type in ("int", "float", "float | None") else "x:y"
        got = getattr(getattr(load_config(env={name: sample}), section), key)
        assert str(got) in (sample, "7.0"), f"{where}: {name} is not read from the environment"


def test_every_node_reads_the_zookeeper_credential_from_its_own_parameter():
    # required (no default): cluster processes refuse to start without a credential
    var = _variables()["zk_auth_parameter"]
    assert "default" not in var and var["type"] in ("string", "${string}")
    # coordinators (and their autoscaler) and containers alike, from the same parameter
    for res in (_resources("aws_instance")["coordinator"], _resources("aws_launch_template")["container"]):
        assert "zk_auth_parameter = var.zk_auth_parameter" in res["user_data"]
        assert "--insecure" not in res["user_data"] and "--zk-auth" not in res["user_data"]
    template = (TF_DIR / "templates" / "linkstream.sh.tftpl").read_text()
    private = template[template.index("umask 077") : template.index("umask 022")]
    assert "--with-decryption --name '${zk_auth_parameter}'" in private
    assert "LINKSTREAM_CLUSTER_ZK_AUTH=%s" in private and ">> /etc/linkstream/linkstream.env" in private
    # least privilege: ssm:GetParameter on exactly that parameter, in a policy of its own
    policy = _resources("aws_iam_role_policy")["zk_auth"]
    assert "count" not in policy
    text = policy["policy"]
    assert 'Action = ["ssm:GetParameter"]' in text and "Resource = [local.zk_auth_parameter_arn]" in text, (
        text
    )
    assert "*" not in text, text
    for name, other in _resources("aws_iam_role_policy").items():
        if name != "zk_auth":
            assert "zk_auth_parameter" not in json.dumps(other), name
    for example in _examples():
        tfvars = (TF_DIR / "examples" / f"{example}.tfvars").read_text()
        assert re.search(r'^zk_auth_parameter\s+= "/linkstream/[a-z]+/zk-auth"$', tfvars, re.M), example


def test_coordinators_are_behind_a_load_balancer():
    lb = _resources("aws_lb")["api"]
    assert lb["load_balancer_type"] == "network"
    attach = _resources("aws_lb_target_group_attachment")["coordinator"]
    assert "aws_instance.coordinator[count.index].id" in attach["target_id"]
    assert _one(_resources("aws_lb_target_group")["api"]["health_check"])["path"] == "/healthz"


def _examples() -> list[str]:
    return sorted(p.stem for p in (TF_DIR / "examples").glob("*.tfvars"))


_no_terraform = pytest.mark.skipif(
    shutil.which("terraform") is None or not PLUGIN_DIR.is_dir(),
    reason="terraform or its offline AWS provider (/opt/tf-plugins) is not installed here",
)


@pytest.fixture(scope="module")
def tf_work(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A copy of terraform/, initialised offline with the provider in /opt/tf-plugins."""
    work = tmp_path_factory.mktemp("tf") / "terraform"
    shutil.copytree(TF_DIR, work, ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*"))
    env = {**os.environ, "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1"}
    init = subprocess.run(
        ["terraform", "init", "-backend=false", "-input=false", f"-plugin-dir={PLUGIN_DIR}"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert init.returncode == 0, init.stderr
    return work, env


def test_examples_exist():
    assert _examples() == ["dev", "prod"]


@_no_terraform
@pytest.mark.parametrize("example", ["dev", "prod"])
def test_terraform_test_plans_the_example(tf_work: tuple[Path, dict[str, str]], example: str) -> None:
    work, env = tf_work
    done = subprocess.run(
        ["terraform", "test", "-no-color", f"-var-file=examples/{example}.tfvars"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 failed" in done.stdout and 'run "mocked_apply"... pass' in done.stdout, done.stdout


@_no_terraform
def test_terraform_validate(tf_work: tuple[Path, dict[str, str]]) -> None:
    work, env = tf_work
    val = subprocess.run(
        ["terraform", "validate", "-json"], cwd=work, env=env, capture_output=True, text=True, timeout=300
    )
    report = json.loads(val.stdout)
    assert report["valid"], report["diagnostics"]
    fmt = subprocess.run(
        ["terraform", "fmt", "-check", "-recursive"], cwd=work, capture_output=True, text=True
    )
    assert fmt.returncode == 0, f"terraform fmt would change: {fmt.stdout}"
