"""LinkStream bulk package."""
