"""Paste forms: the messy ways people paste py-spy dumps into issues and chats, derived from the recorded text dumps
of the shape cases: `python -m tests.hangdoctor.corpus.pastes [CASE ...]` (all of PASTES without arguments).

Each form is written into `<case>/paste_<form>/` from the case's `text/s1` files (one recorded sample); case.json
names each folder in an `analyze` entry. The forms:

- noheader: no `Process`, `Python v` or `Thread` line: the main thread's frames of each process, a blank line
  between processes (what people copy out of a terminal: the seed's excerpt looks like this);
- indented: the dump pasted inside a list or quote: `Thread` lines indented by 4 spaces, frames by 8;
- rank_prefix: every line of a rank's dump behind its log prefix `[rankN]:` (a dump printed through the rank's own
  logging, as torchrun's --log-line-prefix-template or `[rank3]:` tracebacks show them); launchers' dumps left out;
- log_prefix: every line behind a logging prefix with a timestamp and level (`2024-05-01 12:00:01,123 INFO `),
  as a watchdog that runs py-spy and logs its output writes it;
- srun_label: the dumps of every node in one file, from `srun --label`: each line behind its task's label (`0: `,
  `1: `), the nodes' lines interleaved in chunks as srun merges the tasks' output;
- leading_thread: the file starts with a background thread's frames (the tail of an earlier dump in the scrollback)
  before the first `Process` header; the dump that follows is complete;
- truncated: the dump cut off in the middle of the last process's main thread (a paste that hit a length limit):
  the report must say it is partial.

Deterministic: the same recording gives the same pastes (interleaving from a fixed seed).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).parent


@dataclass
class Thread:
    header: str  # 'Thread 123 (idle): "MainThread"'
    lines: list[str] = field(default_factory=list)  # frames (and anything else) below the header, as recorded

    @property
    def is_main(self) -> bool:
        return '"MainThread"' in self.header


@dataclass
class Process:
    header: list[str]  # 'Process N: cmdline', 'Python v...' (and the blank line after them)
    threads: list[Thread] = field(default_factory=list)
    other: list[str] = field(default_factory=list)  # lines before the first thread that are not headers (errors)

    @property
    def pid(self) -> int | None:
        match = re.match(r"Process (\d+):", self.header[0]) if self.header else None
        return int(match.group(1)) if match else None


def parse(text: str) -> list[Process]:
    """Split a concatenated `py-spy dump` text into processes and threads, keeping every line."""
    processes: list[Process] = []
    for line in text.splitlines():
        if line.startswith("Process "):
            processes.append(Process(header=[line]))
        elif not processes:
            processes.append(Process(header=[], other=[line]))
        elif line.startswith("Thread "):
            processes[-1].threads.append(Thread(header=line))
        elif processes[-1].threads:
            processes[-1].threads[-1].lines.append(line)
        elif line.startswith("Python v") or not line.strip():
            processes[-1].header.append(line)
        else:
            processes[-1].other.append(line)
    return processes


def render(processes: list[Process]) -> list[str]:
    lines: list[str] = []
    for process in processes:
        lines += process.header + process.other
        for thread in process.threads:
            lines += [thread.header, *thread.lines]
    return lines


def ranks_of(case: str) -> dict[int, int]:
    """pid -> rank, from the recording's recorded.json."""
    import json

    meta = json.loads((CORPUS / case / "recorded.json").read_text())
    return {p["pid"]: p["rank"] for p in meta["processes"] if p["rank"] is not None}


def sources(case: str) -> list[Path]:
    return sorted((CORPUS / case / "text" / "s1").glob("trace-*.out"))


# ------------------------------------------------------------------------------------------------- the forms
def noheader(case: str) -> dict[str, str]:
    out = {}
    for path in sources(case):
        blocks = []
        for process in parse(path.read_text()):
            main = next((t for t in process.threads if t.is_main), None)
            if main is not None:
                blocks.append("\n".join(line for line in main.lines if line.strip()))
        out[path.name] = "\n\n".join(blocks) + "\n"
    return out


def indented(case: str) -> dict[str, str]:
    out = {}
    for path in sources(case):
        lines = []
        for line in path.read_text().splitlines():
            if line.startswith("Thread "):
                lines.append("    " + line)
            elif line.startswith("    "):
                lines.append("    " + line)
            else:
                lines.append(line)
        out[path.name] = "\n".join(lines) + "\n"
    return out


def rank_prefix(case: str) -> dict[str, str]:
    ranks = ranks_of(case)
    out = {}
    for path in sources(case):
        lines = []
        for process in parse(path.read_text()):
            if process.pid in ranks:
                lines += [f"[rank{ranks[process.pid]}]:{line}" for line in render([process])]
        out[path.name] = "\n".join(lines) + "\n"
    return out


def log_prefix(case: str) -> dict[str, str]:
    out = {}
    second, millis = 1, 123
    for path in sources(case):
        lines = []
        for line in path.read_text().splitlines():
            lines.append(f"2024-05-01 12:00:{second:02d},{millis:03d} INFO {line}")
            millis += 7
            if millis >= 1000:
                second, millis = second + 1, millis - 1000
        out[path.name] = "\n".join(lines) + "\n"
    return out


def srun_label(case: str) -> dict[str, str]:
    rng = random.Random(7)
    streams = [[f"{task}: {line}" for line in path.read_text().splitlines()] for task, path in enumerate(sources(case))]
    merged: list[str] = []
    while any(streams):
        task = rng.choice([i for i, stream in enumerate(streams) if stream])
        take = rng.randint(1, 6)
        merged += streams[task][:take]
        del streams[task][:take]
    return {"trace.out": "\n".join(merged) + "\n"}


def leading_thread(case: str) -> dict[str, str]:
    out = {}
    for index, path in enumerate(sources(case)):
        processes = parse(path.read_text())
        text = path.read_text()
        if index == 0:
            background = next(t for p in reversed(processes) for t in p.threads if not t.is_main)
            text = "\n".join(background.lines) + "\n" + text
        out[path.name] = text
    return out


def truncated(case: str) -> dict[str, str]:
    out = {}
    paths = sources(case)
    for index, path in enumerate(paths):
        text = path.read_text()
        if index == len(paths) - 1:
            processes = parse(text)
            last = processes[-1]
            main = next(t for t in last.threads if t.is_main)
            frames = [line for line in main.lines if line.strip()]
            keep = max(3, len(frames) // 2)
            cut = frames[keep - 1]
            lines = render(processes[:-1]) + last.header + last.other + [main.header]
            lines += main.lines[: main.lines.index(cut)] + [cut[: len(cut) // 2]]
            text = "\n".join(lines)  # no final newline: cut mid-line
        out[path.name] = text
    return out


FORMS = {"noheader": noheader, "indented": indented, "rank_prefix": rank_prefix, "log_prefix": log_prefix,
         "srun_label": srun_label, "leading_thread": leading_thread, "truncated": truncated}

# case -> the forms derived from its recording
PASTES = {
    "bloom_200b": ["noheader", "srun_label"],
    "ds_zero3_mixtral": ["indented"],
    "vllm_pynccl_p2p": ["leading_thread"],
    "sglang_dspark_tp2": ["log_prefix"],
    "megatron_shapes_world_group": ["rank_prefix"],
    "lightning_ckpt_rank_zero_log": ["truncated"],
}


def write(case: str, form: str) -> Path:
    folder = CORPUS / case / f"paste_{form}"
    files = FORMS[form](case)
    folder.mkdir(exist_ok=True)
    for old in folder.iterdir():
        if old.name not in files:
            old.unlink()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", metavar="CASE", help=f"one of {', '.join(sorted(PASTES))} (all by default)")
    args = parser.parse_args(argv)
    unknown = [case for case in args.cases if case not in PASTES]
    if unknown:
        parser.error(f"no paste forms for {', '.join(unknown)}")
    for case in args.cases or sorted(PASTES):
        for form in PASTES[case]:
            print(f"wrote {write(case, form).relative_to(CORPUS)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
