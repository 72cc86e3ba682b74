"""The `weightdiff` command: `weightdiff a/ b/` (diff is the default verb), `weightdiff check DIR`, `drift`.

On the shared core (clicore.app): one error type, every outcome mapped to an exit code in one place, only the
chosen verb imported. A usage error (an unknown flag, a numeric option that is not finite or out of range, an
output path that cannot be written) is one `Error:` line, exit 2. A reader's `BadInput` that no verb turned into
a CommandError is one line too.
"""

from __future__ import annotations

import sys

from rich.console import Console

from hangdoctor.clicore.app import Tool, ensure_streams, main as run_tool
from hangdoctor.clicore.errors import EXIT_USAGE, CommandError
from weightdiff.commands import VERBS
from weightdiff.errors import BadInput

EXIT_CODES = {
    0: "compared everything asked for; no differences (check: no findings)",
    1: "differences found (check: findings)",
    2: "bad usage or bad input (a missing folder, an unreadable or foreign file, ranks on one side only, "
       "mismatched shapes), and no differences among what could be compared; or numpy (torch for .pt files) "
       "missing: pip install 'hangdoctor[train]'",
    3: "both: differences found, and some input could not be compared",
}
TOOL = Tool(
    name="weightdiff", verbs=VERBS, exit_codes=EXIT_CODES, default_verb="diff",
    needs={verb: ("numpy",) for verb in VERBS},  # torch too, for .pt files and DCP folders: said when one is read
    description="Find weights that changed across a save/load, desynchronised tied or replicated copies, and norms "
                "or biases in the weight-decay group, from per-rank dumps, DeepSpeed checkpoints, torch.save "
                "files, HF safetensors or torch.distributed.checkpoint folders.\n\n"
                "  weightdiff A/ B/            same as: weightdiff diff A/ B/\n"
                "  weightdiff check DIR\n  weightdiff drift DIR NAME",
    epilog="exit codes: 0 nothing found, 1 differences or findings, 2 bad usage or input, 3 both of the last two\n"
           "(each verb's --help says more)",
)


def main(argv: list[str] | None = None, *, out: Console | None = None, err: Console | None = None) -> int:
    ensure_streams()
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or Console(highlight=False)
    err = err or Console(stderr=True, highlight=False)

    def call(module, args) -> int:
        try:
            return module.run(args, out, err)
        except BadInput as exc:
            raise CommandError(str(exc), exit_code=EXIT_USAGE) from None

    return run_tool(TOOL, argv, call=call,
                    report=lambda line: err.print(line, highlight=False, soft_wrap=True, markup=False))


def console_script() -> None:
    sys.exit(main())


if __name__ == "__main__":
    console_script()
