output "zookeeper_connect" {
  description = "The --zk argument for linkstream commands (ensemble + chroot)."
  value       = "${local.zk_connect}${local.zk_chroot}"
}

output "coordinator_private_ips" {
  description = "Coordinator nodes (scheduler leader election; each also serves the HTTP API behind the load balancer)."
  value       = aws_instance.coordinator[*].private_ip
}

output "api_url" {
  description = "The HTTP API through the load balancer (reachable from admin_cidrs)."
  value       = "http://${aws_lb.api.dns_name}:${local.api_port}"
}

output "container_group" {
  description = "Autoscaling group of operator containers: set its desired capacity to add/remove containers."
  value       = aws_autoscaling_group.containers.name
}

output "checkpoint_bucket" {
  description = "S3 bucket for checkpoints (and EMR's HBase root)."
  value       = aws_s3_bucket.checkpoints.bucket
}

output "hbase_thrift" {
  description = "The hbase:// dictionary URI when EMR is enabled."
  value       = var.enable_emr ? "hbase://${aws_emr_cluster.data[0].master_public_dns}:9090/linkstream_terms" : null
}
