"""The autoscaler's ``aws`` driver against moto's autoscaling API (real boto3 over HTTP).

moto runs in server mode in this process (``ThreadedMotoServer`` on a free loopback
port), so boto3 talks HTTP to it exactly as to AWS, and the test can also reach moto's
backend for what its API cannot do: moto 5 has no ``CompleteLifecycleAction`` and never
puts an instance in ``Terminating:Wait``, so the test adds that one handler (it records
the call and finishes the termination, as AWS does on ``CONTINUE``) and moves an instance
into ``Terminating:Wait`` itself, as a group-initiated scale-in would.

The containers are stand-ins: one ZooKeeper membership node per InService instance (id =
instance id, as ``terraform/`` starts them), which leaves when asked to drain.  The
leader's load node is written by the test (the lag it wants the autoscaler to see).
Rounds run one by one on a scripted clock.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.client import KazooClient

from linkstream.cluster.autoscaler import AutoscalerService, AwsDriver
from linkstream.scheduler.autoscale import AutoscalePolicy
from linkstream.scheduler.load import LoadReporter
from linkstream.scheduler.membership import Membership

boto3 = pytest.importorskip("boto3", reason="boto3 is not installed (pip install linkstream[aws])")
moto_server = pytest.importorskip("moto.server", reason="moto[server] is not installed (test extra)")

pytestmark = [pytest.mark.zookeeper]

ROOT = "/linkstream"
REGION = "us-east-1"
ACCOUNT = "123456789012"
GROUP = "linkstream-containers"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def moto(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    """moto's server (``.url``) and the CompleteLifecycleAction calls it got (``.completed``)."""
    from moto.autoscaling.models import autoscaling_backends
    from moto.autoscaling.responses import AutoScalingResponse
    from moto.core.responses import EmptyResult

    completed: list[dict[str, Any]] = []

    def complete_lifecycle_action(self: Any) -> Any:  # moto 5 lacks it: record, then terminate
        call = {k: self._get_param(k) for k in ("LifecycleHookName", "AutoScalingGroupName", "InstanceId")}
        call["LifecycleActionResult"] = self._get_param("LifecycleActionResult")
        completed.append(call)
        backend = autoscaling_backends[ACCOUNT][REGION]
        backend.detach_instances(call["AutoScalingGroupName"], [call["InstanceId"]], False)
        backend.ec2_backend.terminate_instances([call["InstanceId"]])
        return EmptyResult()

    monkeypatch.setattr(
        AutoScalingResponse, "complete_lifecycle_action", complete_lifecycle_action, raising=False
    )
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(k, v)
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield SimpleNamespace(url=f"http://127.0.0.1:{port}", completed=completed)
    finally:
        server.stop()


class Fleet:
    """One stand-in container per InService instance: joins membership, leaves on a drain."""

    def __init__(self, make: Callable[..., KazooClient], asg: Any) -> None:
        self.make = make
        self.asg = asg
        self.members: dict[str, tuple[KazooClient, Membership]] = {}
        self.left: list[str] = []

    def sync(self) -> None:
        group = self.asg.describe_auto_scaling_groups(AutoScalingGroupNames=[GROUP])["AutoScalingGroups"][0]
        for inst in group["Instances"]:
            iid = inst["InstanceId"]
            if inst["LifecycleState"] == "InService" and iid not in self.members and iid not in self.left:
                client = self.make()
                m = Membership(client, ROOT)
                m.join(4, f"tcp://10.0.0.1:{len(self.members) + 5000}", iid)
                self.members[iid] = (client, m)
        for iid, (client, m) in list(self.members.items()):
            if m.drain_state(iid) is not None:  # the stand-in has nothing to move: it leaves
                m.leave()
                client.stop()
                client.close()
                del self.members[iid]
                self.left.append(iid)

    def close(self) -> None:
        for client, m in self.members.values():
            m.leave()
            client.stop()
            client.close()


def _group(asg: Any) -> dict[str, Any]:
    return asg.describe_auto_scaling_groups(AutoScalingGroupNames=[GROUP])["AutoScalingGroups"][0]


def test_aws_driver_scales_the_group_and_drains_before_terminating(
    moto: SimpleNamespace, kazoo_factory: Callable[..., KazooClient]
) -> None:
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto.url)
    asg = boto3.client("autoscaling", region_name=REGION, endpoint_url=moto.url)
    ec2.create_launch_template(
        LaunchTemplateName="container",
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "c6in.large"},
    )
    asg.create_auto_scaling_group(
        AutoScalingGroupName=GROUP,
        LaunchTemplate={"LaunchTemplateName": "container", "Version": "$Latest"},
        MinSize=0,
        MaxSize=4,
        DesiredCapacity=1,
        AvailabilityZones=[f"{REGION}a"],
    )
    asg.put_lifecycle_hook(
        LifecycleHookName="drain",
        AutoScalingGroupName=GROUP,
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING",
        HeartbeatTimeout=300,
        DefaultResult="CONTINUE",
    )
    client = kazoo_factory()
    fleet = Fleet(kazoo_factory, asg)
    leader = LoadReporter(client, "leader", ROOT, interval=0)
    clock = [0.0]
    policy = AutoscalePolicy(
        min_containers=1, max_containers=3, target_lag_ms=2000, out_after_s=2, in_after_s=3,
        out_cooldown_s=2, in_cooldown_s=3,
    )  # fmt: skip
    driver = AwsDriver(asg, GROUP, Membership(client, ROOT), hook="drain")
    decisions: list[tuple[float, str, int, int, str]] = []
    service = AutoscalerService(
        client,
        driver,
        policy,
        root=ROOT,
        clock=lambda: clock[0],
        on_decision=lambda d, _s: decisions.append((clock[0], d.action, d.current, d.desired, d.reason)),
    )

    def rounds(n: int, lag: float) -> None:
        for _ in range(n):
            fleet.sync()
            leader.publish({"role": "leader", "lag_ms": lag, "queued": 0, "queries": 1}, force=True)
            service.round()
            clock[0] += 1.0

    try:
        # pressure: the group grows one instance at a time up to the policy's maximum (3)
        rounds(20, lag=8000)
        assert _group(asg)["DesiredCapacity"] == 3
        assert len(fleet.members) == 3
        outs = [d for d in decisions if d[1] == "out"]
        assert [(c, n) for _t, _a, c, n, _r in outs] == [(1, 2), (2, 3)]
        assert decisions[-1][4] == "at_max"
        assert service.metrics.at_max._value.get() == 1

        # the group terminates an instance itself (Terminating:Wait through the drain hook):
        # the autoscaler drains its container first, then completes the lifecycle action
        from moto.autoscaling.models import autoscaling_backends

        backend = autoscaling_backends[ACCOUNT][REGION]
        victim_state = backend.autoscaling_groups[GROUP].instance_states[0]
        victim = victim_state.instance.id
        victim_state.lifecycle_state = "Terminating:Wait"
        backend.autoscaling_groups[GROUP].desired_capacity = 2
        completed = moto.completed
        rounds(1, lag=8000)
        assert victim in driver.drains.started and not completed  # drain requested, hook not yet done
        rounds(2, lag=8000)
        assert victim in fleet.left
        assert completed == [
            {
                "LifecycleHookName": "drain",
                "AutoScalingGroupName": GROUP,
                "InstanceId": victim,
                "LifecycleActionResult": "CONTINUE",
            }
        ]
        assert victim not in {i["InstanceId"] for i in _group(asg)["Instances"]}
        # still under pressure: back to 3
        rounds(10, lag=8000)
        assert _group(asg)["DesiredCapacity"] == 3 and len(fleet.members) == 3

        # calm: scale in one drained container at a time, terminating with a decrement
        left_before = len(fleet.left)
        rounds(30, lag=0)
        group = _group(asg)
        assert group["DesiredCapacity"] == 1
        assert len(group["Instances"]) == 1 and len(fleet.members) == 1
        drained = fleet.left[left_before:]
        assert len(drained) == 2
        ins = [d for d in decisions if d[1] == "in"]
        assert [(c, n) for _t, _a, c, n, _r in ins] == [(3, 2), (2, 1)]
        # every instance it terminated was drained before (its container left first)
        assert not set(drained) & {i["InstanceId"] for i in group["Instances"]}
        assert decisions[-1][4] == "at_min"
        counted = {
            (s.labels["action"], s.labels["reason"]): s.value
            for fam in service.metrics.registry.collect()
            if fam.name == "linkstream_autoscaler_decisions"
            for s in fam.samples
            if s.name.endswith("_total")
        }
        assert counted[("out", "pressure")] >= 3 and counted[("in", "calm")] == 2
    finally:
        fleet.close()


def test_aws_driver_scale_out_is_capped_by_the_group(
    moto: SimpleNamespace, kazoo_factory: Callable[..., KazooClient]
) -> None:
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto.url)
    asg = boto3.client("autoscaling", region_name=REGION, endpoint_url=moto.url)
    ec2.create_launch_template(
        LaunchTemplateName="container2",
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "c6in.large"},
    )
    asg.create_auto_scaling_group(
        AutoScalingGroupName=GROUP,
        LaunchTemplate={"LaunchTemplateName": "container2", "Version": "$Latest"},
        MinSize=0,
        MaxSize=2,
        DesiredCapacity=2,
        AvailabilityZones=[f"{REGION}a"],
    )
    client = kazoo_factory()
    driver = AwsDriver(asg, GROUP, Membership(client, ROOT))
    driver.describe()
    from linkstream.cluster.autoscaler import ClusterView

    driver.scale_out(3, ClusterView({}, {}, {}))
    assert _group(asg)["DesiredCapacity"] == 2
    # two instances launched, none joined yet: both count as joining
    driver.step(ClusterView({}, {}, {}))
    assert driver.joining(ClusterView({}, {}, {})) == 2
