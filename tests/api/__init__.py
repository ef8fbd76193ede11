"""Tests of the HTTP API and the live engine."""
