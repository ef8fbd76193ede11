# The ZooKeeper ensemble on fixed private addresses, so that every member's zoo.cfg can
# list the others before any of them exists.
locals {
  zk_ips = [for i in range(var.zookeeper_nodes) : cidrhost(aws_subnet.cluster.cidr_block, 10 + i)]
}

resource "aws_instance" "zookeeper" {
  count                  = var.zookeeper_nodes
  ami                    = local.ami
  instance_type          = var.zookeeper_instance_type
  subnet_id              = aws_subnet.cluster.id
  private_ip             = local.zk_ips[count.index]
  vpc_security_group_ids = [aws_security_group.cluster.id]
  iam_instance_profile   = aws_iam_instance_profile.node.name
  key_name               = var.key_name != "" ? var.key_name : null
  user_data = templatefile("${path.module}/templates/zookeeper.sh.tftpl", {
    myid    = count.index + 1
    members = local.zk_ips
  })
  metadata_options {
    http_tokens = "required"
  }
  root_block_device {
    volume_size = 30
    encrypted   = true
  }
  tags = { Name = "${var.name}-zk-${count.index + 1}", Role = "zookeeper" }
}
