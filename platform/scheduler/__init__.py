"""LinkStream scheduler package."""
