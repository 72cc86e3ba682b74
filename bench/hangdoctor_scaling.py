"""The scaling guard for hangdoctor: every stage at N and 4N ranks in one run, and the ratios.

Stages: load (parse every node file), verdict (diagnose), the terminal report, the JSON report, the HTML report
(its SVG included), `hangdoctor analyze --json` end to end as a process, and load + verdict of the same node
files with torch's Flight Recorder dump of every rank beside them (one pickle per rank, as `analyze DIR` of a
dump folder reads them). The dump sets are bench/
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
from hangdoctor_analysis import make_dump_set, make_fr_set  # noqa: E402
from scaling import Ratio, ratio, table, verdict_line  # noqa: E402


def stages(folder: Path, with_fr: Path) -> dict:
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
        "load + verdict with FR pickles": lambda: _load_and_diagnose(with_fr, flags),
    }


def _load_and_diagnose(folder: Path, flags) -> None:
    from hangdoctor.analysis.verdict import diagnose
    from hangdoctor.clicore.bulk import paused_gc
    from hangdoctor.formats.load import load_paths

    with paused_gc():
        diagnose(load_paths([folder], flags))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024, help="N (a multiple of 128); the large set is 4N")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.ranks % 128:
        parser.error("--ranks must be a multiple of 128 (TP=8 x PP=16)")
    with tempfile.TemporaryDirectory(prefix="hd-scaling-") as tmp:
        sets = {}
        for name, world in (("small", args.ranks), ("large", 4 * args.ranks)):
            plain, with_fr = Path(tmp) / name, Path(tmp) / f"{name}-fr"
            make_dump_set(world, plain)
            make_dump_set(world, with_fr)
            make_fr_set(world, with_fr, where="files")
            sets[name] = stages(plain, with_fr)
        at_small, at_large = sets["small"], sets["large"]
        ratios: list[Ratio] = []
        for name in at_small:
            slow = name in ("analyze, a process", "load + verdict with FR pickles")
            ratios.append(ratio(name, at_small[name], at_large[name], repeats=3 if slow else args.repeats))
    print(table(f"hangdoctor, {args.ranks:,} and {4 * args.ranks:,} ranks", (f"{args.ranks:,}", f"{4 * args.ranks:,}"),
                ratios))
    code, line = verdict_line(ratios)
    print(line)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
