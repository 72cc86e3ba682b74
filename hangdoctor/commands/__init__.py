"""CLI verbs, one module each: `prepare_parser(parser)` and `run(args, out, err) -> int`; the module's
docstring is its --help. Adding a verb is one line here."""

COMMANDS = {
    "attach": "hangdoctor.commands.attach",
    "analyze": "hangdoctor.commands.analyze",
    "plan": "hangdoctor.commands.plan",
    "experiment": "hangdoctor.commands.experiment",
}
