# Dev: the smallest deployment that still exercises every piece (one ZooKeeper node, one
# coordinator, two containers on the smallest EFA type).  `terraform plan -var-file=examples/dev.tfvars`;
# tests/deployment.tftest.hcl plans it with a mocked provider (tests/terraform/).
name               = "linkstream-dev"
region             = "us-east-1"
availability_zone  = "us-east-1a"
ami_id             = "ami-0123456789abcdef0"
admin_cidrs        = ["203.0.113.0/24"]
rdma_instance_type = "c5n.18xlarge"
containers_min     = 1
containers_desired = 2
containers_max     = 4
container_slots    = 16
zookeeper_nodes    = 1
coordinators       = 1
enable_emr         = false
# the cluster's ZooKeeper credential (user:password), an SSM SecureString created beforehand
zk_auth_parameter = "/linkstream/dev/zk-auth"
