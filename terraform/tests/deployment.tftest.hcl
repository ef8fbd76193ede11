# Plans the deployment with a mocked AWS provider (no credentials, no network) and checks
# the properties it depends on.  Run once per example:
#   terraform test -var-file=examples/dev.tfvars
#   terraform test -var-file=examples/prod.tfvars
# (tests/terraform/test_terraform.py does both, offline, with the provider in /opt/tf-plugins).

mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012" }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  # values the provider validates where other resources reference them
  mock_resource "aws_s3_bucket" {
    defaults = { arn = "arn:aws:s3:::linkstream-checkpoints-mock" }
  }
  mock_resource "aws_launch_template" {
    defaults = { id = "lt-0123456789abcdef0" }
  }
  mock_resource "aws_autoscaling_group" {
    defaults = { arn = "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:0123abcd-0123-4567-89ab-0123456789ab:autoScalingGroupName/linkstream-containers" }
  }
  mock_resource "aws_lb" {
    defaults = { arn = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/lsapi/0123456789abcdef" }
  }
  mock_resource "aws_lb_target_group" {
    defaults = { arn = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/lsapi/0123456789abcdef" }
  }
  mock_resource "aws_iam_role" {
    defaults = { arn = "arn:aws:iam::123456789012:role/linkstream-node" }
  }
  mock_resource "aws_iam_instance_profile" {
    defaults = { arn = "arn:aws:iam::123456789012:instance-profile/linkstream-node" }
  }
}

# The plan of the example must succeed on its own ...
run "plan" {
  command = plan
}

# ... and its properties are asserted on a mocked apply: the mock provider creates
# nothing, it only fills in the ids and ARNs a plan leaves unknown.
run "mocked_apply" {
  command = apply

  # -- the RDMA pool: EFA interfaces in one cluster placement group ---------------------
  assert {
    condition     = aws_placement_group.rdma.strategy == "cluster"
    error_message = "the RDMA pool's placement group must use the cluster strategy"
  }
  assert {
    condition     = alltrue([for nic in aws_launch_template.container.network_interfaces : nic.interface_type == "efa"])
    error_message = "every network interface of the container launch template must be an EFA"
  }
  assert {
    condition     = aws_launch_template.container.placement[0].group_name == aws_placement_group.rdma.name
    error_message = "container instances must launch into the RDMA placement group"
  }
  assert {
    condition     = aws_autoscaling_group.containers.placement_group == aws_placement_group.rdma.id && length(aws_autoscaling_group.containers.vpc_zone_identifier) == 1
    error_message = "the container group must use the placement group in one subnet (one zone)"
  }

  # -- the autoscaling group drains a container before terminating it -------------------
  assert {
    condition = anytrue([
      for h in aws_autoscaling_group.containers.initial_lifecycle_hook :
      h.lifecycle_transition == "autoscaling:EC2_INSTANCE_TERMINATING" && h.heartbeat_timeout >= 60 && h.default_result == "CONTINUE"
    ])
    error_message = "the container group needs a termination lifecycle hook (drain) of at least 60 s"
  }
  assert {
    condition     = aws_autoscaling_group.containers.min_size == var.containers_min && aws_autoscaling_group.containers.max_size == var.containers_max
    error_message = "the container group must scale between containers_min and containers_max"
  }

  # -- no 0.0.0.0/0 ingress on ZooKeeper, the data plane or the API ----------------------
  assert {
    condition = alltrue([
      for sg in [aws_security_group.cluster, aws_security_group.admin, aws_security_group.api, aws_security_group.api_lb] :
      alltrue([for rule in sg.ingress : !contains(coalesce(rule.cidr_blocks, []), "0.0.0.0/0") && !contains(coalesce(rule.ipv6_cidr_blocks, []), "::/0")])
    ])
    error_message = "no security group may accept ingress from 0.0.0.0/0 or ::/0"
  }
  assert {
    condition     = alltrue([for rule in aws_security_group.cluster.ingress : rule.self && length(coalesce(rule.cidr_blocks, [])) == 0])
    error_message = "ZooKeeper and the data plane (cluster group) accept traffic from cluster members only"
  }
  assert {
    condition     = alltrue([for zk in aws_instance.zookeeper : toset(zk.vpc_security_group_ids) == toset([aws_security_group.cluster.id])])
    error_message = "ZooKeeper nodes sit in the cluster security group only"
  }
  assert {
    condition     = alltrue([for rule in aws_security_group.api_lb.ingress : toset(rule.cidr_blocks) == toset(var.admin_cidrs)])
    error_message = "the API load balancer accepts the admin CIDRs only"
  }
  assert {
    condition     = aws_vpc_security_group_ingress_rule.api_from_lb.referenced_security_group_id == aws_security_group.api_lb.id && aws_vpc_security_group_ingress_rule.api_from_lb.cidr_ipv4 == null
    error_message = "coordinators accept API traffic from the load balancer only"
  }

  # -- coordinators behind a load balancer ----------------------------------------------
  assert {
    condition     = aws_lb.api.load_balancer_type == "network" && aws_lb.api.internal == !var.api_public
    error_message = "the API is served through a network load balancer (internal unless api_public)"
  }
  assert {
    condition     = length(aws_lb_target_group_attachment.coordinator) == var.coordinators && alltrue([for i, a in aws_lb_target_group_attachment.coordinator : a.target_id == aws_instance.coordinator[i].id && a.port == 8080])
    error_message = "every coordinator is a target of the API load balancer"
  }
  assert {
    condition     = aws_lb_target_group.api.health_check[0].path == "/healthz" && aws_lb_listener.api.port == 8080
    error_message = "the load balancer checks /healthz and listens on 8080"
  }

  # -- S3: encrypted, versioned, private -------------------------------------------------
  assert {
    condition     = one([for r in aws_s3_bucket_server_side_encryption_configuration.checkpoints.rule : one(r.apply_server_side_encryption_by_default).sse_algorithm]) == "aws:kms"
    error_message = "the checkpoint bucket must be KMS-encrypted"
  }
  assert {
    condition     = aws_s3_bucket_versioning.checkpoints.versioning_configuration[0].status == "Enabled"
    error_message = "the checkpoint bucket must be versioned"
  }
  assert {
    condition = alltrue([
      aws_s3_bucket_public_access_block.checkpoints.block_public_acls,
      aws_s3_bucket_public_access_block.checkpoints.block_public_policy,
      aws_s3_bucket_public_access_block.checkpoints.ignore_public_acls,
      aws_s3_bucket_public_access_block.checkpoints.restrict_public_buckets,
    ])
    error_message = "the checkpoint bucket must block every kind of public access"
  }

  # -- IAM least privilege --------------------------------------------------------------
  assert {
    condition = alltrue([
      for st in jsondecode(aws_iam_role_policy.checkpoints.policy).Statement :
      st.Effect == "Allow" && alltrue([for a in st.Action : startswith(a, "s3:") && !strcontains(a, "*")])
      && alltrue([for r in st.Resource : r == aws_s3_bucket.checkpoints.arn || r == "${aws_s3_bucket.checkpoints.arn}/*"])
    ])
    error_message = "the node role may use named S3 actions on its own bucket only"
  }
  assert {
    condition = alltrue([
      for p in aws_iam_role_policy.api_token : alltrue([
        for st in jsondecode(p.policy).Statement :
        st.Action == ["ssm:GetParameter"] && st.Resource == [local.token_parameter_arn]
      ])
    ]) && length(aws_iam_role_policy.api_token) == (var.api_token_parameter == "" ? 0 : 1)
    error_message = "the node role may read the API token parameter only, and only when one is configured"
  }
  assert {
    condition = length(jsondecode(aws_iam_role_policy.zk_auth.policy).Statement) == 1 && alltrue([
      for st in jsondecode(aws_iam_role_policy.zk_auth.policy).Statement :
      st.Effect == "Allow" && st.Action == ["ssm:GetParameter"]
      && st.Resource == ["arn:aws:ssm:${var.region}:123456789012:parameter/${trimprefix(var.zk_auth_parameter, "/")}"]
    ])
    error_message = "the node role may read the ZooKeeper credential parameter (zk_auth_parameter) and nothing else through that policy"
  }
  assert {
    condition = alltrue([
      for p in concat([aws_iam_role_policy.checkpoints, aws_iam_role_policy.zk_auth], aws_iam_role_policy.api_token, aws_iam_role_policy.autoscaler) :
      alltrue([for st in jsondecode(p.policy).Statement : !contains(st.Resource, "*") || st.Action == ["autoscaling:DescribeAutoScalingGroups"]])
      && (p.name == "zk-auth") == contains(flatten([for st in jsondecode(p.policy).Statement : st.Resource]), local.zk_auth_parameter_arn)
    ])
    error_message = "the ZooKeeper credential parameter is named by the zk-auth policy only, and no SSM policy uses a wildcard"
  }
  assert {
    condition     = jsondecode(aws_iam_role.node.assume_role_policy).Statement[0].Principal.Service == "ec2.amazonaws.com"
    error_message = "only EC2 may assume the node role"
  }
  assert {
    condition     = aws_iam_role_policy_attachment.ssm.policy_arn == "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
    error_message = "the only managed policy on the node role is SSM's instance core"
  }

  # -- settings the code reads ------------------------------------------------------------
  assert {
    condition     = strcontains(base64decode(aws_launch_template.container.user_data), "--bind tcp://$PRIVATE_IP:*") && !strcontains(base64decode(aws_launch_template.container.user_data), "0.0.0.0")
    error_message = "containers bind (and advertise) their private address, never 0.0.0.0"
  }
  assert {
    condition = alltrue([
      for c in aws_instance.coordinator :
      strcontains(c.user_data, "LINKSTREAM_CHECKPOINTS_URI=") && !strcontains(c.user_data, "LINKSTREAM_TOKEN=")
      && strcontains(c.user_data, "LINKSTREAM_API_TOKEN=") == (var.api_token_parameter != "")
    ])
    error_message = "coordinators get LINKSTREAM_API_TOKEN (what the server reads) only with a token parameter"
  }
  assert {
    condition = alltrue([
      for ud in concat([for c in aws_instance.coordinator : c.user_data], [base64decode(aws_launch_template.container.user_data)]) :
      length(regexall("(?s)umask 077\n.*--with-decryption --name '${var.zk_auth_parameter}' .*LINKSTREAM_CLUSTER_ZK_AUTH=.*\numask 022\n", ud)) == 1
      && strcontains(ud, ">> /etc/linkstream/linkstream.env") && strcontains(ud, "EnvironmentFile=/etc/linkstream/linkstream.env")
      && !strcontains(ud, "--insecure") && !strcontains(ud, "--zk-auth")
    ])
    error_message = "coordinators (with the autoscaler) and containers get LINKSTREAM_CLUSTER_ZK_AUTH from zk_auth_parameter in the root-only env file, never --insecure or a credential flag"
  }
  assert {
    condition = alltrue([
      for c in aws_instance.coordinator :
      length(regexall("ExecStart=/opt/linkstream/bin/linkstream run --zk [^ ]+ --id coordinator-[0-9]+ --host [$]PRIVATE_IP --port 8080", c.user_data)) == 1
      && length(regexall("ExecStart=/opt/linkstream/bin/linkstream (run|coordinator)\\b", c.user_data)) == 1
    ])
    error_message = "each coordinator runs `linkstream run --zk` once, serving the API on 8080 (no separate embedded engine)"
  }

  # -- what scales the container pool -----------------------------------------------------
  assert {
    condition     = length(aws_autoscaling_policy.containers_cpu) == (var.container_autoscaler == "cpu" ? 1 : 0)
    error_message = "CPU target tracking exactly when container_autoscaler is cpu"
  }
  assert {
    condition = alltrue([
      for c in aws_instance.coordinator :
      (length(regexall("ExecStart=/opt/linkstream/bin/linkstream autoscaler --zk [^ ]+ --id autoscaler-[0-9]+ --autoscale [0-9]+:[0-9]+ --autoscale-driver aws --group [^ ]+ --hook drain ", c.user_data)) == 1) == (var.container_autoscaler == "linkstream")
    ])
    error_message = "with container_autoscaler = linkstream every coordinator runs `linkstream autoscaler --autoscale-driver aws` on the group (one is elected)"
  }
  assert {
    condition     = strcontains(base64decode(aws_launch_template.container.user_data), "--id $INSTANCE_ID") && strcontains(base64decode(aws_launch_template.container.user_data), "INSTANCE_ID=$(curl")
    error_message = "containers are named by their instance id (what the aws driver drains and terminates)"
  }
  assert {
    condition = length(aws_iam_role_policy.autoscaler) == (var.container_autoscaler == "linkstream" ? 1 : 0) && alltrue([
      for p in aws_iam_role_policy.autoscaler : alltrue([
        for st in jsondecode(p.policy).Statement :
        alltrue([for a in st.Action : startswith(a, "autoscaling:") && !strcontains(a, "*")])
        && (st.Resource == [aws_autoscaling_group.containers.arn] || st.Action == ["autoscaling:DescribeAutoScalingGroups"])
      ])
    ])
    error_message = "the autoscaler may take named autoscaling actions on the container group only (describing excepted)"
  }

  # -- the rest of the shape ------------------------------------------------------------
  assert {
    condition     = length(aws_instance.zookeeper) == var.zookeeper_nodes && length(aws_instance.coordinator) == var.coordinators
    error_message = "one instance per ZooKeeper member and per coordinator"
  }
  assert {
    condition     = alltrue([for i in concat(aws_instance.zookeeper, aws_instance.coordinator) : i.metadata_options[0].http_tokens == "required" && i.root_block_device[0].encrypted])
    error_message = "every node requires IMDSv2 and encrypts its root disk"
  }
  assert {
    condition     = length(aws_emr_cluster.data) == (var.enable_emr ? 1 : 0)
    error_message = "EMR exists exactly when enable_emr is set"
  }
}
