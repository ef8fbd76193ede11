data "aws_iam_policy_document" "assume_ec2" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "node" {
  name_prefix        = "${var.name}-node-"
  assume_role_policy = data.aws_iam_policy_document.assume_ec2.json
}

# Nodes read and write checkpoints in their bucket and nothing else; no access keys exist.
data "aws_iam_policy_document" "checkpoints" {
  statement {
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.checkpoints.arn]
  }
  statement {
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
    resources = ["${aws_s3_bucket.checkpoints.arn}/*"]
  }
}

resource "aws_iam_role_policy" "checkpoints" {
  name   = "checkpoints"
  role   = aws_iam_role.node.id
  policy = data.aws_iam_policy_document.checkpoints.json
}

resource "aws_iam_role_policy_attachment" "ssm" {
  role       = aws_iam_role.node.name
  policy_arn = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "node" {
  name_prefix = "${var.name}-node-"
  role        = aws_iam_role.node.name
}
