# The HTTP API of the coordinator nodes behind a network load balancer: clients use one
# address, and a coordinator that fails its /healthz check (served without a token) leaves
# the rotation.  Every coordinator (`linkstream run --zk`) serves the same API over the
# cluster's one registry: the leader ingests and reports, a standby forwards to it, so any
# target answers and no stickiness is needed.
locals {
  api_port = 8080
}

resource "aws_security_group" "api_lb" {
  name        = "${var.name}-api-lb"
  description = "LinkStream API load balancer: port 8080 from the admin CIDRs only"
  vpc_id      = aws_vpc.this.id

  dynamic "ingress" {
    for_each = length(var.admin_cidrs) > 0 ? [local.api_port] : []
    content {
      description = "LinkStream HTTP API"
      from_port   = ingress.value
      to_port     = ingress.value
      protocol    = "tcp"
      cidr_blocks = var.admin_cidrs
    }
  }
}

resource "aws_vpc_security_group_egress_rule" "api_lb_to_coordinators" {
  security_group_id            = aws_security_group.api_lb.id
  description                  = "to the coordinators' API"
  ip_protocol                  = "tcp"
  from_port                    = local.api_port
  to_port                      = local.api_port
  referenced_security_group_id = aws_security_group.api.id
}

# Coordinators accept API traffic from the load balancer only.
resource "aws_security_group" "api" {
  name        = "${var.name}-api"
  description = "LinkStream HTTP API on coordinators, from the load balancer only"
  vpc_id      = aws_vpc.this.id
}

resource "aws_vpc_security_group_ingress_rule" "api_from_lb" {
  security_group_id            = aws_security_group.api.id
  description                  = "LinkStream HTTP API from the load balancer"
  ip_protocol                  = "tcp"
  from_port                    = local.api_port
  to_port                      = local.api_port
  referenced_security_group_id = aws_security_group.api_lb.id
}

resource "aws_lb" "api" {
  name_prefix        = "lsapi-"
  load_balancer_type = "network"
  internal           = !var.api_public
  subnets            = [aws_subnet.cluster.id]
  security_groups    = [aws_security_group.api_lb.id]
}

resource "aws_lb_target_group" "api" {
  name_prefix = "lsapi-"
  port        = local.api_port
  protocol    = "TCP"
  vpc_id      = aws_vpc.this.id
  target_type = "instance"

  health_check {
    protocol            = "HTTP"
    path                = "/healthz"
    port                = "traffic-port"
    healthy_threshold   = 2
    unhealthy_threshold = 2
    interval            = 10
  }
}

resource "aws_lb_target_group_attachment" "coordinator" {
  count            = var.coordinators
  target_group_arn = aws_lb_target_group.api.arn
  target_id        = aws_instance.coordinator[count.index].id
  port             = local.api_port
}

resource "aws_lb_listener" "api" {
  load_balancer_arn = aws_lb.api.arn
  port              = local.api_port
  protocol          = "TCP"

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.api.arn
  }
}
