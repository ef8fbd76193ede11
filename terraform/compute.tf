# Coordinators (leader + standbys, `linkstream run --zk`: each one also serves the HTTP
# API behind the load balancer in lb.tf) and the elastic pool of operator containers on EFA
# (RDMA) instances in one cluster placement group.

resource "aws_instance" "coordinator" {
  count                  = var.coordinators
  ami                    = local.ami
  instance_type          = var.coordinator_instance_type
  subnet_id              = aws_subnet.cluster.id
  vpc_security_group_ids = [aws_security_group.cluster.id, aws_security_group.admin.id, aws_security_group.api.id]
  iam_instance_profile   = aws_iam_instance_profile.node.name
  key_name               = var.key_name != "" ? var.key_name : null
  user_data = templatefile("${path.module}/templates/linkstream.sh.tftpl", {
    role            = "coordinator"
    efa             = false
    package         = var.linkstream_version
    region          = var.region
    bucket          = aws_s3_bucket.checkpoints.bucket
    token_parameter = var.api_token_parameter
    # every cluster process needs the ZooKeeper credential (coordinator, autoscaler, container)
    zk_auth_parameter = var.zk_auth_parameter
    services = merge(
      {
        # One process per node: `run --zk` is the coordinator (leader election, scheduling)
        # and serves the HTTP API on the node's private address; the load balancer forwards
        # port 8080 here.  Any coordinator answers (standbys forward to the leader), so there
        # is no separate embedded `linkstream run` next to it.
        coordinator = "/opt/linkstream/bin/linkstream run --zk ${local.zk_connect}${local.zk_chroot} --id coordinator-${count.index + 1} --host $PRIVATE_IP --port ${local.api_port}"
      },
      # The load-driven autoscaler: one per coordinator node, one of them elected acts.
      var.container_autoscaler == "linkstream" ? {
        autoscaler = "/opt/linkstream/bin/linkstream autoscaler --zk ${local.zk_connect}${local.zk_chroot} --id autoscaler-${count.index + 1} --autoscale ${var.containers_min}:${var.containers_max} --autoscale-driver aws --group ${aws_autoscaling_group.containers.name} --hook drain --region ${var.region} --target-lag-ms ${var.autoscaler_target_lag_ms}"
      } : {}
    )
  })
  metadata_options {
    http_tokens = "required"
  }
  root_block_device {
    volume_size = 50
    encrypted   = true
  }
  tags = { Name = "${var.name}-coordinator-${count.index + 1}", Role = "coordinator" }
}

# EFA needs the instances packed in one placement group of strategy "cluster".
resource "aws_placement_group" "rdma" {
  name     = "${var.name}-rdma"
  strategy = "cluster"
}

resource "aws_launch_template" "container" {
  name_prefix   = "${var.name}-container-"
  image_id      = local.ami
  instance_type = var.rdma_instance_type
  key_name      = var.key_name != "" ? var.key_name : null

  iam_instance_profile {
    name = aws_iam_instance_profile.node.name
  }

  # The EFA device: RDMA one-sided reads of remote store regions (platform/rdma/).
  network_interfaces {
    device_index                = 0
    interface_type              = "efa"
    subnet_id                   = aws_subnet.cluster.id
    security_groups             = [aws_security_group.cluster.id]
    delete_on_termination       = true
    associate_public_ip_address = true
  }

  placement {
    group_name = aws_placement_group.rdma.name
  }

  metadata_options {
    http_tokens = "required"
  }

  block_device_mappings {
    device_name = "/dev/xvda"
    ebs {
      volume_size = 100
      volume_type = "gp3"
      encrypted   = true
    }
  }

  user_data = base64encode(templatefile("${path.module}/templates/linkstream.sh.tftpl", {
    role            = "container"
    efa             = true
    package         = var.linkstream_version
    region          = var.region
    bucket          = aws_s3_bucket.checkpoints.bucket
    token_parameter = ""
    # every cluster process needs the ZooKeeper credential (coordinator, autoscaler, container)
    zk_auth_parameter = var.zk_auth_parameter
    services = {
      # bind (and so advertise) the private address: peers connect to what a container binds;
      # the container id is the instance id (the autoscaler's aws driver maps one to the other)
      container = "/opt/linkstream/bin/linkstream container --zk ${local.zk_connect}${local.zk_chroot} --id $INSTANCE_ID --capacity ${var.container_slots} --bind tcp://$PRIVATE_IP:*"
    }
  }))

  tag_specifications {
    resource_type = "instance"
    tags          = { Name = "${var.name}-container", Role = "container" }
  }
}

# Scaling in terminates a node; its container leaves ZooKeeper and the scheduler moves its
# tasks.  The lifecycle hook gives a graceful drain time before termination.
resource "aws_autoscaling_group" "containers" {
  name_prefix         = "${var.name}-containers-"
  min_size            = var.containers_min
  max_size            = var.containers_max
  desired_capacity    = var.containers_desired
  vpc_zone_identifier = [aws_subnet.cluster.id]
  placement_group     = aws_placement_group.rdma.id

  launch_template {
    id      = aws_launch_template.container.id
    version = "$Latest"
  }

  initial_lifecycle_hook {
    name                 = "drain"
    lifecycle_transition = "autoscaling:EC2_INSTANCE_TERMINATING"
    default_result       = "CONTINUE"
    heartbeat_timeout    = 300
  }

  tag {
    key                 = "Role"
    value               = "container"
    propagate_at_launch = true
  }

  lifecycle {
    ignore_changes = [desired_capacity]
  }
}

# CPU target tracking, unless `linkstream autoscaler` scales the group (container_autoscaler).
resource "aws_autoscaling_policy" "containers_cpu" {
  count                  = var.container_autoscaler == "cpu" ? 1 : 0
  name                   = "${var.name}-containers-cpu"
  autoscaling_group_name = aws_autoscaling_group.containers.name
  policy_type            = "TargetTrackingScaling"
  target_tracking_configuration {
    predefined_metric_specification {
      predefined_metric_type = "ASGAverageCPUUtilization"
    }
    target_value = var.target_cpu_percent
  }
}
