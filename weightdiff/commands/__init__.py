"""One module per CLI verb: `prepare_parser(parser)` adds its flags, `run(args, out, err) -> int` does it.

Each module's docstring is its --help text.
"""

VERBS = ("diff", "check", "drift")
