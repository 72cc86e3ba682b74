"""`hangdoctor attach --profile`: is the slow rank named, how often is a healthy job accused, what does it cost.

One running gloo job per kind of slowness, its slow rank and factor changed through a control file between
trials, so every trial is a fresh draw without a fresh job. The job under test (`--job`):
- `fixture` (the default): tests/hangdoctor/fixtures/slow_job.py under torchrun, each step `--work` seconds of
  work then an all_reduce; the fixture itself reads the control file;
- `trainer`: the reference trainer (`python -m trainer`, DeepSpeed's pipeline engine, PP2 x DP2 on 4 gloo ranks,
  ZeRO-1, 8 layers of width 256: about 0.6-0.9 s an iteration here), unmodified;
- `ddp-example`: tests/experiments/fixtures/ddp_example.py (our port of PyTorch's ddp-tutorial-series
  multigpu_torchrun.py: DDP, SGD), unmodified, `--nproc` ranks.
The trainer and the DDP example are slowed from outside by bench/straggler_inject/sitecustomize.py (on their
PYTHONPATH): torch's global optimizer step pre-hook spends, on the rank the control file names, (factor - 1) x
that rank's own healthy step time in Python arithmetic (compute) or a sleep, and stamps rank 0's steps.
For each factor (1.05 = 5% slower, ...) and each trial:
- a slow rank drawn at random, three iterations to settle, then `hangdoctor attach --local --profile SECONDS
  --json`; right when the first straggler is exactly that rank;
- healthy trials (no rank slower): a false alarm is any straggler named;
- time to the verdict: attach's wall time (the profile's seconds included);
- the job's cost: rank 0's iteration end times (the fixture logs them; the injector stamps each optimizer step);
  the median iteration time while py-spy samples at the rate it kept (the window the node files' `cpu` gives:
  after attach's own two samples and the cost check) against the median in the `--quiet` seconds before each
  healthy trial's attach, in the same run (a ratio).
Kinds: `sleep` (a rank held up outside Python's work: I/O, a lock), `compute` (Python arithmetic: on this
2-core machine the 4 ranks share the cores, so compute-bound ranks also slow each other) and `loader` (a slow
DataLoader worker; fixture only) and `share` (a lower CPU share: the rank's niceness raised until the job's steps
are F times as long, what other work on its node does; trainer and DDP example only) and `neighbour` (another
process on the rank's own core, CPU-bound for a share of each 20 ms tuned until the steps are F times as long; the
ranks pinned one to a core, `--pin`, implied: on a node with a core per rank a healthy rank waits for none).

    .venv/bin/python bench/stragglers.py --how sleep compute --trials 10 --seconds 5
    .venv/bin/python bench/stragglers.py --job trainer --how compute --factors 1.1 --trials 20 --seconds 20
    .venv/bin/python bench/stragglers.py --job ddp-example --nproc 2 --how compute --factors 1.1 --trials 20 --seconds 20
    .venv/bin/python bench/stragglers.py --job ddp-example --nproc 2 --how neighbour --factors 1.1 --trials 20 --seconds 20
    .venv/bin/python bench/stragglers.py --rescore KEPT --rev 46204f2   # the same samples read by two analyses
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.hangdoctor.livejobs import SlowJob, kill_group, kill_torchrun_workers, wait_until  # noqa: E402
from tests.support import PYTHON, child_env  # noqa: E402

INJECT = REPO / "bench" / "straggler_inject"  # its sitecustomize.py slows a rank of any torch job from outside
# The reference trainer, PP2 x DP2 x TP1 on 4 gloo ranks, ZeRO-1 (its default), a model small enough for this
# machine yet big enough that an iteration takes about 0.6 s; it would run for days: the bench kills it.
TRAINER = ["-m", "trainer", "--pp", "2", "--num-layers", "8", "--hidden-size", "256", "--num-attention-heads", "4",
           "--seq-length", "64", "--vocab-size", "128", "--micro-batch-size", "4", "--global-batch-size", "32",
           "--lr", "3e-4", "--train-iters", "1000000"]
# Our port of PyTorch's examples/distributed/ddp-tutorial-series/multigpu_torchrun.py (DDP, SGD, gloo).
DDP_EXAMPLE = [str(REPO / "tests" / "experiments" / "fixtures" / "ddp_example.py"), "--steps", "1000000000",
               "--batch-size", "512", "--width", "1024"]


class InjectedJob:
    """An unmodified torch job under torchrun, one rank slowed from outside (bench/straggler_inject): the same
    interface as SlowJob (run_id, times, slow, stop). `start` returns once rank 0 stepped its optimizer 10 times
    (the injector knows every rank's healthy step time after 5)."""

    def __init__(self, tmp: Path, program: list[str], *, nproc: int, how: str, pin: bool = False):
        tmp.mkdir(parents=True, exist_ok=True)
        self.nproc, self.how = nproc, how
        self.control, self.times, self.log = tmp / "control.json", tmp / "times.txt", tmp / "torchrun.log"
        self.control.write_text(json.dumps({"rank": -1, "factor": 1.0, "how": how}))
        self.command = [PYTHON, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                        *[str(tmp / "run") if a == "{run}" else a for a in program]]
        self.env = child_env(PYTHONPATH=f"{INJECT}{os.pathsep}{REPO}", HD_STRAGGLER_CONTROL=str(self.control),
                             HD_STRAGGLER_TIMES=str(self.times), HD_STRAGGLER_PIN="1" if pin else "0")
        self.proc: subprocess.Popen | None = None
        self.run_id = ""

    def start(self, timeout: float = 300) -> "InjectedJob":
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=REPO,
                                         start_new_session=True)
        try:
            wait_until(lambda: self.proc.poll() is not None or self.iterations() >= 10, timeout=timeout,
                       what="10 optimizer steps of rank 0")
            assert self.proc.poll() is None, "torchrun ended"
            self.run_id = self._run_id()
        except AssertionError as exc:
            self.stop()
            raise AssertionError(f"job not in place: {exc}\n{self.log.read_text()[-4000:]}") from None
        return self

    def _run_id(self) -> str:
        mark = f"HD_STRAGGLER_CONTROL={self.control}".encode()
        for name in filter(str.isdigit, os.listdir("/proc")):
            try:
                env = open(f"/proc/{name}/environ", "rb").read().split(b"\0")
            except OSError:
                continue
            if mark in env:
                for item in env:
                    if item.startswith(b"TORCHELASTIC_RUN_ID="):
                        return item.split(b"=", 1)[1].decode()
        raise AssertionError("no worker of the job found")

    def slow(self, rank: int, factor: float, how: str | None = None) -> None:
        self.control.write_text(json.dumps({"rank": rank, "factor": factor, "how": how or self.how}))
        before = self.iterations()
        wait_until(lambda: self.iterations() >= before + 3, timeout=60, what="three iterations on the new setting")

    def iterations(self) -> int:
        try:
            return self.times.read_text().count("\n")
        except OSError:
            return 0

    def stop(self) -> None:
        if self.proc is not None:
            kill_group(self.proc)
        if self.run_id:
            kill_torchrun_workers(self.run_id)


def attach(job, seconds: float, rate: int, cost: float, out: Path) -> tuple[dict, float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "hangdoctor", "attach", "--local", "--run-id", job.run_id,
                           "--profile", str(seconds), "--profile-rate", str(rate), "--profile-cost", f"{cost:g}",
                           "--json", "--out", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=seconds + 120)
    wall = time.monotonic() - started
    try:
        return json.loads(done.stdout), wall
    except ValueError:
        return {"error": done.stderr[-500:]}, wall


def iteration_times(job, start: float, end: float) -> list[float]:
    stamps = [float(line.rsplit(" ", 1)[1]) for line in job.times.read_text().splitlines() if " at " in line]
    inside = [t for t in stamps if start <= t <= end]
    return [b - a for a, b in zip(inside, inside[1:])]


def make_job(which: str, how: str, nproc: int, work: float, tmp: Path, pin: bool = False, width: int = 0):
    if which == "fixture":
        return SlowJob(tmp, nproc=nproc, how=how, work=work, lifetime=3600).start()
    program = [*TRAINER, "--run-dir", "{run}"] if which == "trainer" else DDP_EXAMPLE
    if which == "ddp-example" and width:
        program = [*program[:-1], str(width)]
    return InjectedJob(tmp, program, nproc=nproc, how=how, pin=pin or how == "neighbour").start()


def run_kind(which: str, how: str, factors: list[float], trials: int, seconds: float, rate: int, costs: list[float],
             nproc: int, work: float, quiet: float, tmp: Path, rng: random.Random, pin: bool = False,
             width: int = 0) -> dict:
    """Each setting's trials; with several --cost values each trial is run once per value, one after the other,
    on the same slowed rank (side by side: the machine's noise falls on both alike)."""
    (tmp / how).mkdir(parents=True, exist_ok=True)
    job = make_job(which, how, nproc, work, tmp / how, pin, width)
    results: dict = {"job": which, "how": how, "settings": []}
    try:
        time.sleep(2)
        for factor in [1.0, *factors]:
            per_cost = {cost: {"right": 0, "alarms": 0, "walls": [], "gaps": [], "noise": [], "named": [], "rates": []}
                        for cost in costs}
            for trial in range(trials):
                rank = rng.randrange(nproc) if factor != 1.0 else -1
                job.slow(rank, factor)
                for cost in costs:
                    _trial(job, which, how, factor, trial, rank, seconds, rate, cost, quiet, tmp, per_cost[cost])
            for cost, got in per_cost.items():
                setting = {"factor": factor, "cost": cost, "trials": trials, "wall_s": statistics.median(got["walls"]),
                           "rate_used": statistics.median(got["rates"]) if got["rates"] else None,
                           "named": got["named"]}
                if factor == 1.0:
                    setting.update(false_alarms=got["alarms"], iteration_ratio=statistics.median(got["noise"])
                                   if got["noise"] else None, ratios=[round(r, 3) for r in got["noise"]])
                else:
                    setting.update(right=got["right"], median_gap=statistics.median(got["gaps"]) if got["gaps"] else None)
                results["settings"].append(setting)
                print(json.dumps({"job": which, "how": how, **setting}), flush=True)
    finally:
        job.stop()
    return results


SETTLED = 2.5  # seconds into attach when the samplers run at the rate they keep: where the node files do not say


def sampled_window(out: Path) -> tuple[float, float] | None:
    """(from, to) in epoch seconds: when the samplers ran at the rate they kept (after attach's own samples and the
    cost check), from the node files' `cpu` window; None from a collector that does not write it."""
    for node in sorted((out / "nodes").glob("*.json")):
        try:
            for process in json.loads(node.read_text()).get("processes", []):
                cpu = (process.get("profile") or {}).get("cpu") or {}
                if "since" in cpu:
                    return cpu["since"], cpu["since"] + cpu["seconds"]
        except (OSError, ValueError):
            continue
    return None


def _trial(job, which: str, how: str, factor: float, trial: int, rank: int, seconds: float, rate: int, cost: float,
           quiet: float, tmp: Path, got: dict) -> None:
    before = time.time()
    waited = quiet if factor == 1.0 else min(quiet, 2.0)  # unsampled iteration times: healthy trials
    time.sleep(waited)
    out = tmp / f"{how}-{factor}-{trial}-cost{cost:g}"
    report, wall = attach(job, seconds, rate, cost, out)
    if out.is_dir():  # the truth beside the report, for --rescore
        (out / "trial.json").write_text(json.dumps({"job": which, "how": how, "factor": factor, "slow_rank": rank}))
    got["walls"].append(wall)
    if report.get("rate"):
        got["rates"].append(report["rate"])
    stragglers = report.get("stragglers", [])
    if "error" in report:
        print(json.dumps({"trial": trial, "error": report["error"]}), flush=True)
    if factor == 1.0:
        got["alarms"] += bool(stragglers)
        unsampled = iteration_times(job, before, before + quiet)
        window = sampled_window(out) or (before + quiet + SETTLED, before + quiet + seconds)
        sampled = iteration_times(job, *window)
        if unsampled and sampled:
            got["noise"].append(statistics.median(sampled) / statistics.median(unsampled))
    else:
        got["right"] += bool(stragglers) and stragglers[0]["ranks"] == [rank]
    during = iteration_times(job, before + waited, before + waited + seconds)
    got["named"].append((rank, round(statistics.median(during), 3) if during else None,
                         [s["ranks"] for s in stragglers], [round(s["waited_for"], 3) for s in stragglers]))
    if stragglers:
        got["gaps"].append(stragglers[0]["waited_for"])


def rescore(folder: Path, revs: list[str]) -> int:
    """Every kept attach report under `folder` (its trial.json says which rank was slowed) read again by
    `hangdoctor analyze --profile` of this tree and of each git revision: the same samples, side by side."""
    trials = sorted(folder.rglob("trial.json"))
    if not trials:
        print(f"Error: no trial.json under {folder} (run with --keep first)", file=sys.stderr)
        return 2
    trees: dict[str, Path] = {"this tree": REPO}
    with tempfile.TemporaryDirectory(prefix="rescore-") as tmp:
        for rev in revs:
            tree = Path(tmp) / rev
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(tree), rev], check=True)
            trees[rev] = tree
        try:
            scores: dict[str, dict] = {name: {} for name in trees}
            for trial in trials:
                truth = json.loads(trial.read_text())
                key = (truth["job"], truth["how"], truth["factor"])
                for name, tree in trees.items():
                    done = subprocess.run([sys.executable, "-m", "hangdoctor", "analyze", str(trial.parent),
                                           "--profile", "--json"], capture_output=True, text=True, cwd=tree,
                                          env={**os.environ, "PYTHONPATH": str(tree)}, timeout=120)
                    named = [s["ranks"] for s in json.loads(done.stdout).get("stragglers", [])] \
                        if done.returncode == 0 else None
                    tally = scores[name].setdefault(key, {"right": 0, "alarms": 0, "trials": 0, "errors": 0})
                    tally["trials"] += 1
                    if named is None:
                        tally["errors"] += 1
                    elif truth["factor"] == 1.0:
                        tally["alarms"] += bool(named)
                    else:
                        tally["right"] += bool(named) and named[0] == [truth["slow_rank"]]
        finally:
            for rev in revs:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(trees[rev])])
    print("| job | kind | slower by | " + " | ".join(trees) + " |")
    print("|---|---|---:|" + "---:|" * len(trees))
    for key in sorted(scores["this tree"]):
        job, how, factor = key
        cells = []
        for name in trees:
            t = scores[name][key]
            said = f"{t['alarms']}/{t['trials']} false alarms" if factor == 1.0 else f"{t['right']}/{t['trials']} right"
            cells.append(said + (f" ({t['errors']} errors)" if t["errors"] else ""))
        print(f"| {job} | {how} | {'healthy' if factor == 1.0 else f'{factor - 1:.0%}'} | " + " | ".join(cells) + " |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", choices=("fixture", "trainer", "ddp-example"), default="fixture")
    parser.add_argument("--how", nargs="+", default=["sleep", "compute"], choices=("sleep", "compute", "loader", "share", "neighbour"))
    parser.add_argument("--factors", type=float, nargs="+", default=[1.05, 1.1, 1.2, 1.5])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=int, default=50)
    parser.add_argument("--cost", type=float, nargs="+", default=[2.0],
                        help="attach's --profile-cost, percent; several: each trial once per value, side by side")
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--quiet", type=float, default=None,
                        help="seconds before each attach; a healthy trial's unsampled iteration times come from them "
                             "(default: 2, 10 for the trainer's 0.6 s iterations)")
    parser.add_argument("--work", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--width", type=int, default=0,
                        help="the DDP example's layer width (default 1024: about 50 ms a step on 2 ranks here)")
    parser.add_argument("--pin", action="store_true",
                        help="pin each rank to one core (LOCAL_RANK modulo the cores; implied by --how neighbour)")
    parser.add_argument("--keep", type=Path, help="a folder to keep the jobs' logs and every attach report in")
    parser.add_argument("--rescore", type=Path, metavar="FOLDER",
                        help="run no job: read again every report kept in FOLDER (by --keep), with this tree and "
                             "each --rev, and print the scores side by side")
    parser.add_argument("--rev", nargs="*", default=[], help="git revisions to rescore beside this tree")
    args = parser.parse_args()
    if args.rescore:
        return rescore(args.rescore, args.rev)
    rng = random.Random(args.seed)
    quiet = args.quiet if args.quiet is not None else (10.0 if args.job == "trainer" else 2.0)
    if args.job == "trainer" and args.nproc != 4:
        parser.error("the trainer runs PP2 x DP2: --nproc 4")
    if args.job != "fixture" and "loader" in args.how:
        parser.error("the injector slows a rank by compute, sleep or a lower CPU share; the loader kind is the "
                     "fixture's")
    if args.job == "fixture" and {"share", "neighbour"} & set(args.how):
        parser.error("a lower CPU share is the injector's (--job trainer or ddp-example)")
    if "neighbour" in args.how and args.nproc > len(os.sched_getaffinity(0)):
        parser.error(f"a neighbour on a rank's core needs a core per rank: --nproc at most "
                     f"{len(os.sched_getaffinity(0))} here")
    with tempfile.TemporaryDirectory(prefix="stragglers-") as folder:
        where = args.keep or Path(folder)
        every = [run_kind(args.job, how, args.factors, args.trials, args.seconds, args.rate, args.cost, args.nproc,
                          args.work, quiet, where, rng, args.pin, args.width) for how in args.how]
    print()
    print(f"{args.job}: {args.nproc} ranks, " + (f"{args.work * 1000:g} ms of work a step, " if args.job == "fixture"
                                                   else "") + f"profile {args.seconds:g}s at {args.rate}/s, "
          f"{args.trials} trials per setting")
    print("| kind | --profile-cost | rate used /s (median) | slower by | named first | false alarms (healthy) | "
          "attach wall s (median) | median gap |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for result in every:
        for s in result["settings"]:
            head = f"| {result['how']} | {s['cost']:g}% | {s['rate_used'] or '-'} |"
            if s["factor"] == 1.0:
                ratio = s["iteration_ratio"]
                print(f"{head} healthy | - | {s['false_alarms']}/{s['trials']} | {s['wall_s']:.1f} | "
                      + (f"- (iteration time sampled / not: {ratio:.3f}) |" if ratio else "- |"))
            else:
                gap = f"{s['median_gap']:.0%}" if s["median_gap"] is not None else "-"
                print(f"{head} {s['factor'] - 1:.0%} | {s['right']}/{s['trials']} | - | {s['wall_s']:.1f} | {gap} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
