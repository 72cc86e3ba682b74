"""The scaling guard for hangdoctor: every stage at N and 4N ranks in one run, and the ratios.

Stages: load (parse every node file), verdict (diagnose), the terminal report, the JSON report, the HTML report
(its SVG included), and `hangdoctor analyze --json` end to end as a process. The dump sets are bench/
hangdoctor_analysis.py's (real recorded dumps, ranks substituted; node-merged node files, TP=8 x PP=16), so N
must be a multiple of 128. A stage whose time grows more than LIMIT (6) times for 4x the ranks fails the guard
(exit 1): CI runs it at 1,024 and 4,096 ranks (.ci/run). Ratios only, measured side by side in one run; no
absolute time is asserted.

    .venv/bin/python bench/hangdoctor_scaling.py --ranks 1024
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from hangdoctor_analysis import make_dump_set  # noqa: E402
from scaling import Ratio, ratio, table, verdict_line  # noqa: E402


def stages(folder: Path) -> dict:
    """Each stage as a function of nothing, on the dump set in `folder`; the later stages' inputs prepared once."""
    from rich.console import Console

    from hangdoctor.analysis.verdict import diagnose
    from hangdoctor.clicore.bulk import paused_gc
    from hangdoctor.formats.load import load_paths
    from hangdoctor.identity import TopologyFlags
    from hangdoctor.render.html import render_html
    from hangdoctor.render.jsonout import verdict_to_dict
    from hangdoctor.render.terminal import render_verdict

    flags = TopologyFlags(tp=8, pp=16)
    collection = load_paths([folder], flags)
    verdict = diagnose(collection)

    def load():
        with paused_gc():
            load_paths([folder], flags)

    def analyze():
        done = subprocess.run([sys.executable, "-m", "hangdoctor", "analyze", str(folder), "--json", "--tp", "8",
                               "--pp", "16"], capture_output=True, cwd=REPO, timeout=600)
        if done.returncode not in (0, 1):
            raise SystemExit(f"analyze failed ({done.returncode}): {done.stderr.decode()[-300:]}")

    return {
        "load": load,
        "verdict": lambda: diagnose(collection),
        "terminal report": lambda: render_verdict(verdict, Console(file=io.StringIO(), width=120)),
        "JSON report": lambda: json.dumps(verdict_to_dict(verdict)),
        "HTML report (with its SVG)": lambda: render_html(verdict),
        "analyze, a process": analyze,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024, help="N (a multiple of 128); the large set is 4N")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.ranks % 128:
        parser.error("--ranks must be a multiple of 128 (TP=8 x PP=16)")
    with tempfile.TemporaryDirectory(prefix="hd-scaling-") as tmp:
        small, large = Path(tmp) / "small", Path(tmp) / "large"
        make_dump_set(args.ranks, small)
        make_dump_set(4 * args.ranks, large)
        at_small, at_large = stages(small), stages(large)
        ratios: list[Ratio] = []
        for name in at_small:
            slow = name == "analyze, a process"
            ratios.append(ratio(name, at_small[name], at_large[name], repeats=3 if slow else args.repeats))
    print(table(f"hangdoctor, {args.ranks:,} and {4 * args.ranks:,} ranks", (f"{args.ranks:,}", f"{4 * args.ranks:,}"),
                ratios))
    code, line = verdict_line(ratios)
    print(line)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
