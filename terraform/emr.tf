# Optional EMR cluster: HBase (term dictionary, static subquery results; LinkStream talks to
# its Thrift server, port 9090) and Spark (`linkstream load --spark yarn`).

resource "aws_iam_role" "emr_service" {
  count       = var.enable_emr ? 1 : 0
  name_prefix = "${var.name}-emr-"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Action    = "sts:AssumeRole"
      Principal = { Service = "elasticmapreduce.amazonaws.com" }
    }]
  })
}

resource "aws_iam_role_policy_attachment" "emr_service" {
  count      = var.enable_emr ? 1 : 0
  role       = aws_iam_role.emr_service[0].name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AmazonEMRServicePolicy_v2"
}

resource "aws_emr_cluster" "data" {
  count         = var.enable_emr ? 1 : 0
  name          = "${var.name}-data"
  release_label = var.emr_release
  applications  = ["HBase", "Spark", "ZooKeeper"]
  service_role  = aws_iam_role.emr_service[0].arn
  log_uri       = "s3://${aws_s3_bucket.checkpoints.bucket}/emr-logs/"

  ec2_attributes {
    subnet_id                         = aws_subnet.cluster.id
    instance_profile                  = aws_iam_instance_profile.node.arn
    emr_managed_master_security_group = aws_security_group.cluster.id
    emr_managed_slave_security_group  = aws_security_group.cluster.id
  }

  master_instance_group {
    instance_type = "m6i.xlarge"
  }

  core_instance_group {
    instance_type  = "r6i.2xlarge"
    instance_count = var.emr_core_nodes
  }

  configurations_json = jsonencode([
    {
      Classification = "hbase"
      Properties     = { "hbase.emr.storageMode" = "s3" }
    },
    {
      Classification = "hbase-site"
      Properties     = { "hbase.rootdir" = "s3://${aws_s3_bucket.checkpoints.bucket}/hbase" }
    },
  ])
}
