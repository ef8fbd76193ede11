"""LinkStream containers package."""
