"""Record a live corpus case with real py-spy: `python -m tests.hangdoctor.corpus.record CASE [CASE...]`.

Starts the case (live.py), waits until every rank is ready, and writes into `tests/hangdoctor/corpus/<case>/`:
text dumps twice a second apart (text/s1, text/s2), `--native`, `--locals` and `--json` dumps, all of every
Python process of the job in pid order (launchers included, as `ps | grep python | xargs py-spy dump` catches
them), then `hangdoctor attach --pid ... --samples 2` into attach/. recorded.json says when, with what, and
which pid had which rank. case.json (the expectations) is written by hand and never touched here.
Variant folders of an earlier recording are replaced only once the new recording is complete.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.hangdoctor.corpus.live import LiveJob, host_of, load_cases
from tests.support import PYTHON, REPO, child_env

CORPUS = Path(__file__).parent
HOST = "node1"  # the recording machine's name is random: a process stands for node1 unless HD_CORPUS_HOST says
VARIANTS = {"text/s1": [], "text/s2": [], "native": ["--native"], "locals": ["--locals"]}


def pyspy() -> str:
    return str(Path(PYTHON).with_name("py-spy"))


def dump(pid: int, flags: list[str]) -> str:
    """py-spy's stdout and stderr, as `srun --output` captures both."""
    done = subprocess.run([pyspy(), "dump", "--pid", str(pid), *flags], capture_output=True, text=True, timeout=60,
                          env=child_env(RUST_BACKTRACE="0"))
    return done.stdout + done.stderr


def record(name: str) -> Path:
    case = load_cases()[name]
    target = CORPUS / name
    with tempfile.TemporaryDirectory(prefix=f"record-{name}-") as tmp, LiveJob(case, Path(tmp) / "job") as job:
        staging = Path(tmp) / "out"
        pids = job.python_pids()
        ranks = {pid: rank for rank, pid in job.rank_pids.items()}
        hosts = {pid: host_of(pid, HOST) for pid in pids}
        for variant, flags in VARIANTS.items():
            if variant == "text/s2":
                time.sleep(1.0)
            (staging / variant).mkdir(parents=True)
            for host in sorted(set(hosts.values())):
                text = "".join(dump(pid, flags) for pid in pids if hosts[pid] == host)
                (staging / variant / f"trace-{host}.out").write_text(text)
        (staging / "json").mkdir()
        for pid in pids:
            (staging / "json" / f"{hosts[pid]}-{pid}.json").write_text(dump(pid, ["--json"]))
        attach = [PYTHON, "-m", "hangdoctor", "attach", "--pid", *map(str, pids), "--samples", "2", "--interval", "1",
                  "--out", str(staging / "attach"), "--json"]
        if "TORCH_FR_BUFFER_SIZE" in case.env:  # the fixture dumps its Flight Recorder while it hangs
            _wait_for_dumps(job.fr_dir, case.ranks)
            shutil.copytree(job.fr_dir, staging / "fr")
            attach += ["--fr-dir", str(job.fr_dir)]
        done = subprocess.run(attach, capture_output=True, text=True, timeout=120, cwd=REPO, env=child_env())
        if not (staging / "attach" / "nodes").is_dir():
            raise SystemExit(f"{name}: attach wrote no node files (exit {done.returncode}): {done.stderr[-2000:]}")
        for extra in ("report.html", "report.json"):
            (staging / "attach" / extra).unlink(missing_ok=True)
        nodes = list((staging / "attach" / "nodes").glob("*.json"))
        if len(nodes) == 1 and len(set(hosts.values())) == 1:  # the machine's random name -> the case's node name
            nodes[0].rename(nodes[0].with_name(f"{next(iter(hosts.values()))}.json"))
        meta = {
            "case": name, "command": case.command(), "recorded": time.strftime("%Y-%m-%d"),
            "py_spy": subprocess.run([pyspy(), "--version"], capture_output=True, text=True).stdout.strip(),
            "python": platform.python_version(), "torch": _torch_version(),
            "processes": [{"pid": pid, "host": hosts[pid], "rank": ranks.get(pid), "cmdline": _cmdline(pid)}
                          for pid in pids],
        }
        (staging / "recorded.json").write_text(json.dumps(meta, indent=2) + "\n")
        target.mkdir(exist_ok=True)
        for part in ("text", "native", "locals", "json", "fr", "attach", "recorded.json"):
            old = target / part
            if old.is_dir():
                shutil.rmtree(old)
            elif old.exists():
                old.unlink()
            if not (staging / part).exists():
                continue
            shutil.move(str(staging / part), str(old))
    return target


def _wait_for_dumps(folder: Path, ranks: int, bound: float = 30.0) -> None:
    deadline = time.monotonic() + bound
    while len([p for p in folder.glob("fr_rank_*") if p.suffix != ".tmp"]) < ranks:
        if time.monotonic() > deadline:
            raise SystemExit(f"{folder}: {ranks} Flight Recorder dumps expected within {bound:.0f}s")
        time.sleep(0.5)


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace").replace(str(REPO) + "/", "") for part in raw.split(b"\0") if part]


def _torch_version() -> str:
    try:
        import torch
    except ImportError:
        return ""
    return torch.__version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", choices=sorted(load_cases()) or None)
    args = parser.parse_args(argv)
    for name in args.cases:
        print(f"recorded {name} into {record(name).relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
