"""One module per CLI verb: `prepare_parser(parser)` adds its flags, `run(args, out, err) -> int` does it.

Each module's docstring is its --help text; the summary here is its docstring's first line (a test keeps them
equal), so that `weightdiff --help` imports no verb.
"""

VERBS = {
    "diff": ("weightdiff.commands.diff", "Compare two dump sets (or checkpoints) rank by rank: weightdiff [diff] A/ B/"),
    "check": ("weightdiff.commands.check", "Check one moment of one run for internal consistency: weightdiff check DIR"),
    "drift": ("weightdiff.commands.drift", "Follow one parameter over iterations: weightdiff drift DIR NAME"),
}
