"""One module per CLI verb; each module's docstring is its --help text."""
