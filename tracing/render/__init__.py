"""Renderers: rich text for people (rich is imported here only) and JSON with the same data."""
