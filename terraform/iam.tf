# The node role: its own checkpoint bucket, the ZooKeeper credential parameter, the API
# token parameter (when given) and SSM Session Manager; no access keys exist anywhere.
# Policies are written with jsonencode so that `terraform test` (tests/*.tftest.hcl) can
# assert on their statements.
locals {
  assume_ec2 = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Action    = "sts:AssumeRole"
      Principal = { Service = "ec2.amazonaws.com" }
    }]
  })
  token_parameter_arn   = var.api_token_parameter == "" ? "" : "arn:${data.aws_partition.current.partition}:ssm:${var.region}:${data.aws_caller_identity.current.account_id}:parameter/${trimprefix(var.api_token_parameter, "/")}"
  zk_auth_parameter_arn = "arn:${data.aws_partition.current.partition}:ssm:${var.region}:${data.aws_caller_identity.current.account_id}:parameter/${trimprefix(var.zk_auth_parameter, "/")}"
}

data "aws_partition" "current" {}

data "aws_caller_identity" "current" {}

resource "aws_iam_role" "node" {
  name_prefix        = "${var.name}-node-"
  assume_role_policy = local.assume_ec2
}

# Nodes read and write objects in their bucket and nothing else.
resource "aws_iam_role_policy" "checkpoints" {
  name = "checkpoints"
  role = aws_iam_role.node.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid      = "ListCheckpoints"
        Effect   = "Allow"
        Action   = ["s3:ListBucket"]
        Resource = [aws_s3_bucket.checkpoints.arn]
      },
      {
        Sid      = "ReadWriteCheckpoints"
        Effect   = "Allow"
        Action   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
        Resource = ["${aws_s3_bucket.checkpoints.arn}/*"]
      },
    ]
  })
}

# The API token: one SecureString, read at boot (templates/linkstream.sh.tftpl).
resource "aws_iam_role_policy" "api_token" {
  count = var.api_token_parameter == "" ? 0 : 1
  name  = "api-token"
  role  = aws_iam_role.node.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid      = "ReadApiToken"
      Effect   = "Allow"
      Action   = ["ssm:GetParameter"]
      Resource = [local.token_parameter_arn]
    }]
  })
}

# The cluster's ZooKeeper credential: one SecureString, read at boot by every node
# (templates/linkstream.sh.tftpl); every cluster process refuses to start without it.
resource "aws_iam_role_policy" "zk_auth" {
  name = "zk-auth"
  role = aws_iam_role.node.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid      = "ReadZooKeeperCredential"
      Effect   = "Allow"
      Action   = ["ssm:GetParameter"]
      Resource = [local.zk_auth_parameter_arn]
    }]
  })
}

# `linkstream autoscaler --autoscale-driver aws` (container_autoscaler = "linkstream"): the
# three actions it takes, on the container group only; describing groups has no
# resource-level permission.
resource "aws_iam_role_policy" "autoscaler" {
  count = var.container_autoscaler == "linkstream" ? 1 : 0
  name  = "autoscaler"
  role  = aws_iam_role.node.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid    = "ScaleTheContainerGroup"
        Effect = "Allow"
        Action = [
          "autoscaling:SetDesiredCapacity",
          "autoscaling:TerminateInstanceInAutoScalingGroup",
          "autoscaling:CompleteLifecycleAction",
        ]
        Resource = [aws_autoscaling_group.containers.arn]
      },
      {
        Sid      = "DescribeGroups"
        Effect   = "Allow"
        Action   = ["autoscaling:DescribeAutoScalingGroups"]
        Resource = ["*"]
      },
    ]
  })
}

resource "aws_iam_role_policy_attachment" "ssm" {
  role       = aws_iam_role.node.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "node" {
  name_prefix = "${var.name}-node-"
  role        = aws_iam_role.node.name
}
