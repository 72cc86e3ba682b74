"""Renderers: rich text, JSON (the same fields), PNG pictures. They never compute a verdict themselves."""
