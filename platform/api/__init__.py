"""LinkStream api package."""
