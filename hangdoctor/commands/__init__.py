"""CLI verbs, one module each: `prepare_parser(parser)`, `run(args, out, err) -> int` and `EXIT_CODES` ({code:
meaning} for the codes that verb returns); the module's docstring is its --help description and EXIT_CODES its
epilog. Adding a verb is one line here."""

COMMANDS = {
    "attach": "hangdoctor.commands.attach",
    "analyze": "hangdoctor.commands.analyze",
    "plan": "hangdoctor.commands.plan",
    "experiment": "hangdoctor.commands.experiment",
}
