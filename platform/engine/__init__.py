"""LinkStream engine package."""
