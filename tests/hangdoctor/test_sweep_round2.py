"""Bad input from the second sweep (issue 26), one table row per input, through the real command: exit 2 or 3,
exactly one `Error:` line naming what is wrong, never a traceback, and every run bounded (a FIFO or /dev/zero
read would block or fill memory: `run_bounded` fails the row instead of hanging the suite).

The readers behind the rows: clicore/inputs.py (regular files only, a size bound, strict JSON, field types),
clicore/regex.py (a repeat inside a repeat refused), the rank bound of the topology flags and of node files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import PYTHON, REPO, child_env, kill_tree, run_bounded

ATTACH_FOLDER = REPO / "tests" / "hangdoctor" / "corpus" / "deepspeed_launcher" / "attach"
CASE_TEXT = REPO / "tests" / "hangdoctor" / "corpus" / "deepspeed_launcher" / "text" / "s1" / "trace-node1.out"
FR_DUMP = REPO / "tests" / "hangdoctor" / "data" / "fr" / "skip_allreduce" / "fr_rank_3"


@dataclass(frozen=True)
class Row:
    name: str
    argv: Callable[[Path], list[str]]  # given a fresh folder, the hangdoctor arguments
    code: int
    says: str  # a part of the one Error: line


def fifo(tmp: Path) -> str:
    os.mkfifo(tmp / "fifo")
    return str(tmp / "fifo")


def written(name: str, text: str) -> Callable[[Path], str]:
    def make(tmp: Path) -> str:
        (tmp / name).write_text(text)
        return str(tmp / name)
    return make


def copied(source: Path, name: str) -> Callable[[Path], str]:
    def make(tmp: Path) -> str:
        shutil.copy(source, tmp / name)
        return str(tmp / name)
    return make


def node_file_with(**changes) -> Callable[[Path], str]:
    """The corpus node file with the first rank's process fields replaced."""
    def make(tmp: Path) -> str:
        doc = json.loads((ATTACH_FOLDER / "nodes" / "node1.json").read_text())
        proc = next(p for p in doc["processes"] if p.get("rank") is not None)
        proc.update(changes)
        (tmp / "node1.json").write_text(json.dumps(doc))
        return str(tmp / "node1.json")
    return make


def watch_on_hang(tmp: Path, script: str, mode: int) -> list[str]:
    """A watch whose --on-hang would fail at the first stall (hours later): refused at the start instead."""
    path = tmp / "notify"
    path.write_text(script)
    path.chmod(mode)
    return ["watch", "--pid", "1", "--log", written("log", "")(tmp), "--on-hang", str(path)]


def sample_with(**changes) -> Callable[[Path], str]:
    """The corpus node file with the first sample of the first rank changed."""
    def make(tmp: Path) -> str:
        doc = json.loads((ATTACH_FOLDER / "nodes" / "node1.json").read_text())
        next(p for p in doc["processes"] if p.get("rank") is not None)["samples"][0].update(changes)
        (tmp / "node1.json").write_text(json.dumps(doc))
        return str(tmp / "node1.json")
    return make


def rules(rows: list[dict]) -> Callable[[Path], str]:
    return written("rules.json", json.dumps(rows))


def analyze_with_rules(make: Callable[[Path], str]) -> Callable[[Path], list[str]]:
    return lambda tmp: ["analyze", str(ATTACH_FOLDER), "--wait-rules", make(tmp)]


RULE = {"framework": "mine", "file": "", "function": "wait_for_peer", "kind": "collective"}
ROWS = [
    Row("a FIFO as a dump", lambda t: ["analyze", fifo(t)], 3, "a FIFO, not a file"),
    Row("/dev/zero as a dump", lambda t: ["analyze", "/dev/zero"], 3, "/dev/zero: a device, not a file"),
    Row("JSON nested 20,000 deep", lambda t: ["analyze", written("deep.json", "[" * 20000 + "]" * 20000)(t)], 3,
        "JSON nested too deeply"),
    Row("JSON Infinity", lambda t: ["analyze", node_file_with(rank=float("inf"))(t)], 3,
        "Infinity is not a JSON number"),
    Row("a node file's world_size 10**15", lambda t: ["analyze", node_file_with(world_size=10**15)(t)], 3,
        "process field 'world_size' is 1000000000000000"),
    Row("a node file's rank as a string", lambda t: ["analyze", node_file_with(rank="3")(t)], 3,
        "process field 'rank' is '3'"),
    Row("a node file's pid as a string", lambda t: ["analyze", node_file_with(pid="x")(t)], 3,
        "process field 'pid' is 'x'"),
    Row("a sample's cpu_percent as a string", lambda t: ["analyze", sample_with(cpu_percent="abc")(t)], 3,
        "sample field 'cpu_percent' is 'abc'"),
    Row("a sample's index as a string", lambda t: ["analyze", sample_with(index="x")(t)], 3,
        "sample field 'index' is 'x'"),
    Row("--html onto the node file being analysed",
        lambda t: ["analyze", node_file_with()(t), "--json", "--html", str(t / "node1.json")], 2,
        "is an input of this command"),
    Row("--dp x --tp beyond the rank bound", lambda t: ["analyze", str(ATTACH_FOLDER), "--dp", "4194304", "--tp",
                                                        "4194304"], 2, "more than 4,194,304"),
    Row("--wait-rules a FIFO", analyze_with_rules(fifo), 2, "a FIFO, not a file"),
    Row("--wait-rules /dev/zero", lambda t: ["analyze", str(ATTACH_FOLDER), "--wait-rules", "/dev/zero"], 2,
        "a device, not a file"),
    Row('--wait-rules "file": 5', analyze_with_rules(rules([{**RULE, "file": 5}])), 2, "row 0: file is 5, not a str"),
    Row("--wait-rules (a+)+$", analyze_with_rules(rules([{**RULE, "function": "(a+)+$"}])), 2,
        "repeats a repeat"),
    Row("--wait-rules (a|a)*", analyze_with_rules(rules([{**RULE, "function": "(a|a)*"}])), 2, "repeats a repeat"),
    Row("--wait-rules (a|aa)+", analyze_with_rules(rules([{**RULE, "function": "(a|aa)+"}])), 2, "repeats a repeat"),
    Row("--wait-rules (.*a){20}", analyze_with_rules(rules([{**RULE, "function": "(.*a){20}"}])), 2,
        "repeats a repeat"),
    Row("--wait-rules Infinity", analyze_with_rules(written("rules.json", '[{"weight": Infinity}]')), 2,
        "Infinity is not a JSON number"),
    Row("a Flight Recorder file named for rank 99999999999",
        lambda t: ["analyze", copied(FR_DUMP, "fr_rank_99999999999")(t)],
        3, "no rank (0 to 4,194,303) at the end of the file name"),
    Row("--on-hang a script without #!", lambda t: watch_on_hang(t, "echo hang\n", 0o755), 2,
        "neither a program nor a script starting with #!"),
    Row("--on-hang a file not executable", lambda t: watch_on_hang(t, "#!/bin/sh\necho hang\n", 0o644), 2,
        "not executable"),
    Row("--on-hang a folder", lambda t: ["watch", "--pid", "1", "--log", written("log", "")(t), "--on-hang", str(t)], 2,
        "a folder"),
    Row("--hostfile a FIFO", lambda t: ["attach", "--hostfile", fifo(t)], 2, "a FIFO, not a file"),
    Row("--iteration-regex (a+)+$", lambda t: ["watch", "--pid", "1", "--log", written("log", "")(t),
                                               "--iteration-regex", "(a+)+$"], 2, "repeats a repeat"),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_bad_input_gives_one_line(tmp_path: Path, row: Row):
    result = run_bounded([PYTHON, "-m", "hangdoctor", *row.argv(tmp_path)], timeout=60, env=child_env(), cwd=REPO)
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == row.code and len(errors) == 1 and row.says in errors[0], (result.returncode, errors)


def test_the_corpus_node_file_is_still_read(tmp_path):
    """The control row: the same file unchanged is read (the rows above fail for their change alone)."""
    shutil.copy(ATTACH_FOLDER / "nodes" / "node1.json", tmp_path / "node1.json")
    result = run_bounded([PYTHON, "-m", "hangdoctor", "analyze", str(tmp_path / "node1.json")], timeout=60,
                         env=child_env(), cwd=REPO)
    assert result.returncode in (0, 1) and "Error:" not in result.stderr, result.stderr[-2000:]


def test_an_attach_cut_short_by_its_deadline_is_partial_exit_1(tmp_path):
    """400 samples cannot be taken in 5 s (a dump takes tens of ms): the answer is partial, and says so, where it
    exited 0 as if complete (sweep round 2)."""
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        time.sleep(0.3)
        result = subprocess.run([PYTHON, "-m", "hangdoctor", "attach", "--pid", str(target.pid), "--samples", "400",
                                 "--interval", "0.01", "--timeout", "5", "--json", "--out", str(tmp_path / "out")],
                                capture_output=True, text=True, env=child_env(), cwd=REPO, timeout=60)
    finally:
        kill_tree(target.pid)
    data = json.loads(result.stdout)
    assert result.returncode == 1, result.stderr[-2000:]
    assert data["headline"].endswith("; partial: the collection's deadline came before every sample was taken")
    assert any("deadline reached" in p and "of 400 samples taken" in p for p in data["partial"]), data["partial"]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-8-sig"])
def test_a_paste_saved_as_utf16_reads_as_its_utf8_original(tmp_path, encoding):
    """Windows editors and PowerShell's `>` save pastes as UTF-16 (with or without a byte-order mark): it was
    "not a py-spy dump" (sweep round 2)."""
    original = CASE_TEXT.read_text()
    (tmp_path / "paste.txt").write_bytes(original.encode(encoding))
    shutil.copy(CASE_TEXT, tmp_path / "original.txt")
    places = []
    for name in ("original.txt", "paste.txt"):
        result = run_bounded([PYTHON, "-m", "hangdoctor", "analyze", str(tmp_path / name), "--json"], timeout=60,
                             env=child_env(), cwd=REPO)
        assert result.returncode in (0, 1), result.stderr[-2000:]
        places.append([(p["folded"], p["position"]) for p in json.loads(result.stdout)["places"]])
    assert places[0] == places[1] and places[0]


def test_the_version_probe_of_a_wrapper_that_prints_forever_reads_a_few_bytes(tmp_path):
    """Third sweep AT04: `--py-spy` a script that runs `yes`; the version probe buffered everything it printed in
    its 5 s (a MemoryError under a memory limit). Now it reads at most a few KiB and ends the wrapper."""
    import time

    from hangdoctor.collector.dump import pyspy_version

    wrapper = tmp_path / "yes.sh"
    wrapper.write_text("#!/bin/sh\nexec yes\n")
    wrapper.chmod(0o755)
    started = time.monotonic()
    assert pyspy_version(str(wrapper)) == ""
    assert time.monotonic() - started < 5  # it stopped at the bound, long before the probe's 10 s
