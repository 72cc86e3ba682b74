"""CLI verbs, one module each: `prepare_parser(parser)`, `run(args, out, err) -> int` and `EXIT_CODES` ({code:
meaning} for the codes that verb returns); the module's docstring is its --help description and EXIT_CODES its
epilog. Adding a verb is one line here: its module and the one-line summary `hangdoctor --help` shows (the first
line of the module's docstring; a test keeps them equal). Only the verb being run is imported: `attach` must not
pay for `experiment`'s imports. `plan` and `experiment` are hosted here but live in their own package,
experiments/ (a tool of its own; docs/experiments.md)."""

COMMANDS = {
    "attach": ("hangdoctor.commands.attach",
               "Attach to a running job, dump every rank's stack (py-spy; pystack where it fails), and say who is "
               "stuck where."),
    "watch": ("hangdoctor.commands.watch",
              "Watch a running job; when it stalls, take the verdict at once, keep it, and tell someone."),
    "analyze": ("hangdoctor.commands.analyze",
                "Analyse dumps offline: a folder written by `attach`, collector node files, or any text that holds stacks."),
    "plan": ("hangdoctor.experiments.commands.plan",
             "Plan a 3D topology: list the valid (TP, PP, DP, MBS) for a model on N GPUs, with estimated memory per GPU."),
    "experiment": ("hangdoctor.experiments.commands.experiment",
                   "Run your job (or the reference trainer) over configurations x toggles x repeats, catch hangs, "
                   "tabulate, plot."),
}
