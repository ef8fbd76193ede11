# Prod: a 3-node ZooKeeper ensemble, two coordinators behind the API load balancer, an
# autoscaled EFA pool, EMR (HBase + Spark), and the API token and ZooKeeper credential from SSM.
# `terraform plan -var-file=examples/prod.tfvars`; tests/deployment.tftest.hcl plans it too.
name                = "linkstream-prod"
region              = "eu-west-1"
availability_zone   = "eu-west-1a"
ami_id              = "ami-0fedcba9876543210"
admin_cidrs         = ["198.51.100.0/24", "203.0.113.0/24"]
rdma_instance_type  = "c6in.32xlarge"
containers_min      = 3
containers_desired  = 4
containers_max      = 32
container_slots     = 64
zookeeper_nodes     = 3
coordinators        = 2
enable_emr          = true
emr_core_nodes      = 3
api_token_parameter = "/linkstream/prod/api-token"
zk_auth_parameter   = "/linkstream/prod/zk-auth"
# the load-driven autoscaler (tick lag, queue, busy time) instead of CPU target tracking
container_autoscaler = "linkstream"
