"""LinkStream rdma package."""
