data "aws_ami" "debian" {
  count       = var.ami_id == "" ? 1 : 0
  most_recent = true
  owners      = ["136693071363"] # Debian
  filter {
    name   = "name"
    values = ["debian-12-amd64-*"]
  }
}

locals {
  ami        = var.ami_id != "" ? var.ami_id : data.aws_ami.debian[0].id
  zk_chroot  = "/${var.name}"
  zk_connect = join(",", [for ip in aws_instance.zookeeper[*].private_ip : "${ip}:2181"])
}

resource "aws_vpc" "this" {
  cidr_block           = var.vpc_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true
  tags                 = { Name = var.name }
}

resource "aws_internet_gateway" "this" {
  vpc_id = aws_vpc.this.id
}

# One subnet in one zone: the cluster placement group and EFA need a single zone.
resource "aws_subnet" "cluster" {
  vpc_id                  = aws_vpc.this.id
  cidr_block              = cidrsubnet(var.vpc_cidr, 4, 0)
  availability_zone       = var.availability_zone
  map_public_ip_on_launch = true
  tags                    = { Name = "${var.name}-cluster" }
}

resource "aws_route_table" "public" {
  vpc_id = aws_vpc.this.id
  route {
    cidr_block = "0.0.0.0/0"
    gateway_id = aws_internet_gateway.this.id
  }
}

resource "aws_route_table_association" "cluster" {
  subnet_id      = aws_subnet.cluster.id
  route_table_id = aws_route_table.public.id
}

# S3 traffic (checkpoints) stays inside the VPC.
resource "aws_vpc_endpoint" "s3" {
  vpc_id          = aws_vpc.this.id
  service_name    = "com.amazonaws.${var.region}.s3"
  route_table_ids = [aws_route_table.public.id]
}

# Every LinkStream node: all traffic between members (EFA requires an all-traffic
# self-referencing rule), nothing from outside except the admin CIDRs.
resource "aws_security_group" "cluster" {
  name        = "${var.name}-cluster"
  description = "LinkStream nodes: ZooKeeper, ZeroMQ data plane, EFA, metrics"
  vpc_id      = aws_vpc.this.id

  ingress {
    description = "all traffic between cluster members (EFA, ZooKeeper quorum, ZeroMQ)"
    from_port   = 0
    to_port     = 0
    protocol    = "-1"
    self        = true
  }

  egress {
    description = "all traffic between cluster members (EFA requirement)"
    from_port   = 0
    to_port     = 0
    protocol    = "-1"
    self        = true
  }

  egress {
    description = "package installs and S3"
    from_port   = 0
    to_port     = 0
    protocol    = "-1"
    cidr_blocks = ["0.0.0.0/0"]
  }
}

resource "aws_security_group" "admin" {
  name        = "${var.name}-admin"
  description = "SSH from the admin CIDRs only"
  vpc_id      = aws_vpc.this.id

  dynamic "ingress" {
    for_each = length(var.admin_cidrs) > 0 ? [22] : []
    content {
      description = "SSH"
      from_port   = ingress.value
      to_port     = ingress.value
      protocol    = "tcp"
      cidr_blocks = var.admin_cidrs
    }
  }
}
