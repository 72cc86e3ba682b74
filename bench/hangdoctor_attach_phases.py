"""Where `hangdoctor attach --local --json` spends its time, phase by phase, on a local hung job.

Each round runs attach in a fresh process (`--child`) that imports hangdoctor from --repo (and, with --compare,
from a second checkout, interleaved) and wraps its main steps to timestamp them; the parent times the whole
process. Phases, medians over the rounds, in milliseconds:
- python start: interpreter and site start-up, and exit (the process's wall time less the time inside it);
- start-up: imports, argument parsing, finding py-spy, creating --out, until the job's processes are looked for;
- /proc scan: finding the torchrun job's ranks by their environment;
- dumps: py-spy on every rank (in parallel, 2 x CPUs at a time); the rest of the collection: state, CPU, version;
- after: everything once the stacks are in: raw node files, imports still missing, reading the documents
  (`collection_from_docs`), the verdict, report.json, printing, report.html.

    .venv/bin/python bench/hangdoctor_attach_phases.py --ranks 16 --rounds 9 [--compare DIR]
"""

from __future__ import annotations

import sys
import time

START = time.perf_counter()  # the child's clock starts before any import hangdoctor might share with this script

if sys.argv[1:2] != ["--child"]:
    import argparse
    import json
    import statistics
    import subprocess
    import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# (module, function) pairs wrapped in the child, present in every version measured.
WRAPPED = [("hangdoctor.sources.local", "pick_torchrun_job"), ("hangdoctor.commands.attach", "gather"),
           ("hangdoctor.collector.dump", "dump_many"), ("hangdoctor.commands.attach", "save_docs")]


def child(repo: Path, argv: list[str]) -> None:
    """`--child REPO attach ...`: run attach from REPO with its steps timestamped; the marks go to stderr."""
    import importlib
    import json

    start = START
    sys.path.insert(0, str(repo))
    marks: dict[str, float] = {}

    def wrap(module, name: str) -> None:
        original = getattr(module, name)

        def timed(*args, **kwargs):
            marks[f"{name}>"] = time.perf_counter() - start
            try:
                return original(*args, **kwargs)
            finally:
                marks[f"{name}<"] = time.perf_counter() - start
        setattr(module, name, timed)

    import hangdoctor.cli as cli  # what `python -m hangdoctor` imports first

    for module_name, name in WRAPPED:
        wrap(importlib.import_module(module_name), name)
    marks["wrapped"] = time.perf_counter() - start
    code = cli.main(argv)
    marks["end"] = time.perf_counter() - start
    print(json.dumps({"code": code, "marks": marks}), file=sys.stderr)


def phases(marks: dict[str, float], wall: float) -> dict[str, float]:
    return {
        "python start": wall - marks["end"],
        "start-up": marks["pick_torchrun_job>"],
        "/proc scan": marks["pick_torchrun_job<"] - marks["pick_torchrun_job>"],
        "dumps": marks["dump_many<"] - marks["dump_many>"],
        "rest of the collection": (marks["gather<"] - marks["gather>"]) - (marks["dump_many<"] - marks["dump_many>"])
                                  - (marks["pick_torchrun_job<"] - marks["pick_torchrun_job>"]),
        "after: node files, analysis, reports, printing": marks["end"] - marks["gather<"],
        "total": wall,
    }


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        child(Path(sys.argv[2]), sys.argv[3:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--compare", type=Path, metavar="DIR", help="also measure the hangdoctor of this checkout")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from tests.hangdoctor.livejobs import GlooJob, torchrun_run_id
    from tests.support import PYTHON, child_env

    with tempfile.TemporaryDirectory(prefix="hd-bench-phases-") as tmp_name:
        tmp = Path(tmp_name)
        env = child_env()
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode cached (this sandbox sets it)
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        job = GlooJob(tmp, nproc=args.ranks, extra=["--tp", "2", "--pp", "2"], lifetime=1800).start(timeout=600)
        try:
            run_id = torchrun_run_id(str(job.ready_dir))
            repos = {"this checkout": REPO, **({str(args.compare): args.compare.resolve()} if args.compare else {})}
            results: dict[str, list[dict[str, float]]] = {name: [] for name in repos}
            for round_ in range(args.rounds + 1):  # round 0 fills the bytecode cache and is not kept
                for name in (list(repos) if round_ % 2 else list(reversed(repos))):
                    argv = [PYTHON, str(Path(__file__).resolve()), "--child", str(repos[name]), "attach", "--local",
                            "--run-id", run_id, "--json", "--out", str(tmp / f"out-{round_}-{len(name)}")]
                    started = time.perf_counter()
                    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp, timeout=120)
                    wall = time.perf_counter() - started
                    report = json.loads(done.stderr.strip().splitlines()[-1])
                    assert report["code"] == 0 and json.loads(done.stdout)["responded"]["count"] == args.ranks
                    if round_:
                        results[name].append(phases(report["marks"], wall))
            print(f"gloo fixture, {args.ranks} ranks under torchrun, {args.rounds} rounds (ms, medians)")
            names = list(results)
            print("| phase | " + " | ".join(names) + " |")
            print("|---|" + "---:|" * len(names))
            for phase in results[names[0]][0]:
                cells = [f"{statistics.median(r[phase] for r in results[n]) * 1000:.0f}" for n in names]
                print(f"| {phase} | " + " | ".join(cells) + " |")
        finally:
            job.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
