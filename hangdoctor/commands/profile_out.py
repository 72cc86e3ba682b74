"""The slow-rank report printed by `attach --profile` and by `analyze --profile` (one function for both): the
stragglers found in the collection's time profiles, as --json or text on stdout; with a folder (attach's --out)
also profile.json and the flame graph files there."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from hangdoctor.clicore.errors import EXIT_ENVIRONMENT, EXIT_OK, EXIT_PARTIAL
from hangdoctor.commands.common import write_text


def print_profile(collection, table, as_json: bool, out: Console, err: Console | None = None,
                  folder: Path | None = None) -> int:
    """0 complete, 1 some ranks not profiled, 4 (environment) when no rank could be profiled."""
    from hangdoctor.analysis.stragglers import find_stragglers
    from hangdoctor.render.profile import finding_to_dict, render_text, write_flame_files

    finding = find_stragglers(collection, table)
    report = finding_to_dict(finding)
    written = []
    if folder is not None:
        write_text(folder / "profile.json", json.dumps(report, indent=1) + "\n")
        written = write_flame_files(collection, finding, folder)
    out.file.write(json.dumps(report, indent=1) + "\n" if as_json else render_text(report))
    out.file.flush()
    if written and err is not None:
        err.print(f"Flame graphs (collapsed stacks, for speedscope or flamegraph.pl): "
                  f"{', '.join(str(p) for p in written)}", markup=False, highlight=False, soft_wrap=True)
    if not finding.ranks:
        return EXIT_ENVIRONMENT
    return EXIT_PARTIAL if finding.unprofiled else EXIT_OK
