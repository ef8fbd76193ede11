"""LinkStream query package."""
