"""LinkStream store package."""
