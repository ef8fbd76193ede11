variable "name" {
  description = "Deployment name; prefixes every resource and the ZooKeeper chroot."
  type        = string
  default     = "linkstream"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{2,30}$", var.name))
    error_message = "name: 3-31 lowercase letters, digits or '-', starting with a letter."
  }
}

variable "region" {
  description = "AWS region."
  type        = string
  default     = "us-east-1"
}

variable "availability_zone" {
  description = "The one zone of the cluster placement group (EFA traffic does not cross zones)."
  type        = string
  default     = "us-east-1a"
}

variable "vpc_cidr" {
  description = "CIDR of the VPC."
  type        = string
  default     = "10.42.0.0/16"
}

variable "admin_cidrs" {
  description = "CIDRs allowed to reach the HTTP API (port 8080) and SSH. Empty = none."
  type        = list(string)
  default     = []
}

variable "ami_id" {
  description = "AMI for every node (Debian 12 or Amazon Linux 2023 with the EFA driver). Empty = latest Debian 12."
  type        = string
  default     = ""
}

variable "key_name" {
  description = "EC2 key pair for SSH; empty disables SSH keys (use SSM)."
  type        = string
  default     = ""
}

variable "rdma_instance_type" {
  description = "Instance type of the RDMA pool; must support EFA (e.g. c5n.18xlarge, c6in.32xlarge, hpc7g.16xlarge)."
  type        = string
  default     = "c6in.32xlarge"
}

variable "containers_min" {
  description = "Minimum number of operator-container nodes."
  type        = number
  default     = 2
}

variable "containers_max" {
  description = "Maximum number of operator-container nodes (autoscaling ceiling)."
  type        = number
  default     = 16
  validation {
    condition     = var.containers_max >= 1 && var.containers_max <= 256
    error_message = "containers_max must be between 1 and 256."
  }
}

variable "containers_desired" {
  description = "Initial number of operator-container nodes."
  type        = number
  default     = 3
}

variable "container_slots" {
  description = "Task slots (capacity) each container advertises in ZooKeeper."
  type        = number
  default     = 64
}

variable "container_autoscaler" {
  description = "What scales the container pool: \"cpu\" (the group's CPU target tracking) or \"linkstream\" (`linkstream autoscaler --autoscale-driver aws` on the coordinators: tick lag, queued elements and busy time, every container drained before its instance terminates)."
  type        = string
  default     = "cpu"
  validation {
    condition     = contains(["cpu", "linkstream"], var.container_autoscaler)
    error_message = "container_autoscaler must be \"cpu\" or \"linkstream\"."
  }
}

variable "autoscaler_target_lag_ms" {
  description = "With container_autoscaler = \"linkstream\": the tick lag (ms of event time pushed but not yet reported) above which it adds containers."
  type        = number
  default     = 5000
}

variable "target_cpu_percent" {
  description = "Average CPU the container pool's target-tracking policy keeps."
  type        = number
  default     = 60
}

variable "zookeeper_nodes" {
  description = "ZooKeeper ensemble size (odd: 1, 3 or 5)."
  type        = number
  default     = 3
  validation {
    condition     = contains([1, 3, 5], var.zookeeper_nodes)
    error_message = "zookeeper_nodes must be 1, 3 or 5."
  }
}

variable "zookeeper_instance_type" {
  description = "Instance type of ZooKeeper nodes."
  type        = string
  default     = "m6i.large"
}

variable "coordinators" {
  description = "Coordinator processes (one leader, the rest standbys)."
  type        = number
  default     = 2
  validation {
    condition     = var.coordinators >= 1
    error_message = "coordinators must be at least 1."
  }
}

variable "coordinator_instance_type" {
  description = "Instance type of coordinator / API nodes."
  type        = string
  default     = "m6i.xlarge"
}

variable "enable_emr" {
  description = "Create an EMR cluster with HBase (dictionary, static subquery results) and Spark (bulk load)."
  type        = bool
  default     = false
}

variable "emr_release" {
  description = "EMR release label."
  type        = string
  default     = "emr-7.2.0"
}

variable "emr_core_nodes" {
  description = "EMR core nodes."
  type        = number
  default     = 3
}

variable "linkstream_version" {
  description = "pip requirement installed on every node, e.g. 'linkstream==0.1.0' or a wheel URL."
  type        = string
  default     = "linkstream"
}

variable "checkpoint_retention_days" {
  description = "Days before non-current checkpoint objects expire."
  type        = number
  default     = 14
}

variable "api_token_parameter" {
  description = "Name of an SSM SecureString holding the HTTP API bearer token (created outside Terraform; never in the repo). Empty = no token."
  type        = string
  default     = ""
}

variable "zk_auth_parameter" {
  description = "Name of an SSM SecureString holding the cluster's ZooKeeper digest credential `user:password` (created outside Terraform; never in the repo). Every node reads it at boot into its root-only env file as LINKSTREAM_CLUSTER_ZK_AUTH; cluster processes refuse to start without it."
  type        = string
  validation {
    condition     = can(regex("^/?[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$", var.zk_auth_parameter))
    error_message = "zk_auth_parameter: the name of an SSM parameter (letters, digits, '_', '.', '-', '/'); required, the cluster does not run without a ZooKeeper credential."
  }
}

variable "api_public" {
  description = "Make the API load balancer internet-facing (still reachable from admin_cidrs only); false keeps it internal to the VPC."
  type        = bool
  default     = false
}
