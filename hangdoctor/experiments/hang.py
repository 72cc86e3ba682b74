"""Diagnose a hung run with `hangdoctor attach` and keep its verdict in the run's folder, before it is stopped.

The attach runs as its own process (`python -m hangdoctor attach ... --json --out RUN/hangdoctor`) under a hard
bound: whatever happens to the ranks, the experiment goes on. RUN/hangdoctor/ then holds what attach writes
(report.json, report.html, nodes/), plus
- verdict.json: the verdict it printed (the same data as report.json);
- verdict.txt: the one-line summary the tables show: the headline, then the first hint, e.g.
  "HUNG: 2 ranks stuck, 2 in 2 calls (2/2 responded); pp=0 [rank 0] waits in broadcast <- ... that pp=1 ...";
- attach.stderr: what attach said on stderr (warnings, or the error when it could not attach).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from hangdoctor.request import AttachRequest, read_verdict, to_argv
from slurm.process import run_command


@dataclass(frozen=True)
class HangVerdict:
    summary: str  # one line for the tables
    hung: bool | None  # hangdoctor's word: True stuck, False every rank progressed, None cannot tell
    folder: str  # RUN/hangdoctor
    exit_code: int | None  # attach's: 0 complete, 1 partial (some ranks did not answer), others: no verdict

    @property
    def has_verdict(self) -> bool:
        return self.exit_code in (0, 1)


def summary_line(verdict: dict) -> str:
    """The headline, then the first suspect's sentence (ranks, confidence) or, with no suspect, the first hint."""
    suspects, hints = verdict.get("suspects") or [], verdict.get("hints") or []
    if suspects:
        first = suspects[0]
        ranks = f"rank{'s' if first.get('count', 1) != 1 else ''} {first.get('folded')}"
        return f"{verdict.get('headline', 'no headline')}; {ranks} [{first.get('confidence')}] {first.get('reason')}"
    return verdict.get("headline", "no headline") + (f"; {hints[0]}" if hints else "")


def diagnose(attach_args: list[str], folder: Path, request: AttachRequest,
             env: dict[str, str] | None = None, python: str = sys.executable) -> HangVerdict:
    """attach's own bound is request.timeout; its process gets 20 s more before it is killed."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = [python, "-m", "hangdoctor", "attach", *attach_args, *to_argv(request), "--json", "--out", str(folder)]
    result = run_command(argv, timeout=request.timeout + 20.0, env=env)
    (folder / "attach.stderr").write_text(result.stderr)
    if result.timed_out:
        summary = f"hangdoctor attach did not finish within {request.timeout + 20:g}s"
        return _keep(folder, HangVerdict(summary, None, str(folder), None))
    try:
        verdict = read_verdict(result.stdout) if result.returncode in (0, 1) else None
    except ValueError:
        verdict = None
    if verdict is None:
        said = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        summary = f"hangdoctor attach failed (exit {result.returncode})" + (f": {said[0][7:]}" if said else "")
        return _keep(folder, HangVerdict(summary, None, str(folder), result.returncode))
    (folder / "verdict.json").write_text(json.dumps(verdict, indent=1) + "\n")
    return _keep(folder, HangVerdict(summary_line(verdict), verdict.get("hung"), str(folder), result.returncode))


def _keep(folder: Path, verdict: HangVerdict) -> HangVerdict:
    (folder / "verdict.txt").write_text(verdict.summary + "\n")
    return verdict
