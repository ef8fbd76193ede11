# LinkStream on AWS: an RDMA (EFA) node pool for operator containers, a ZooKeeper
# ensemble, coordinators, an optional EMR cluster (HBase + Spark) and an S3 bucket for
# checkpoints.  See README.md in this directory.
terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0, < 6.0"
    }
  }
}

provider "aws" {
  region = var.region
  default_tags {
    tags = {
      Project    = "linkstream"
      Deployment = var.name
      ManagedBy  = "terraform"
    }
  }
}
