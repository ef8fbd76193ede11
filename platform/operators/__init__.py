"""LinkStream operators package."""
