"""LinkStream rdf package."""
