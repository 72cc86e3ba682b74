"""pystack, the second stack reader, where py-spy fails: a real hung gloo job under torchrun (4 ranks, pp=2: pp=0
in a pipeline broadcast, pp=1 in a world all_reduce) attached once with a py-spy that fails on every process (a
wrapper that exits 1 with the error py-spy prints for a CPython it does not know) and once with the real py-spy:
the verdict is the same, and the report says which ranks' stacks pystack read. Then the collector on its own: py-spy
absent, and hung processes of every Python pyenv has from 3.10 to 3.13, read by pystack."""

import json
import subprocess
from pathlib import Path

import pytest

from tests.hangdoctor.livejobs import GlooJob, Procs, read_line
from tests.support import PYTHON, child_env, run_bounded
from tests.tracing.helpers import pyenv_python

PYSTACK = str(Path(PYTHON).parent / "pystack")
COLLECTOR = [PYTHON, "-m", "hangdoctor.collector"]


@pytest.fixture(scope="module")
def gloo4(tmp_path_factory):
    job = GlooJob(tmp_path_factory.mktemp("gloo4"), nproc=4, extra=["--pp", "2"]).start()
    yield job
    job.stop()


@pytest.fixture
def failing_pyspy(tmp_path) -> str:
    wrapper = tmp_path / "py-spy"
    wrapper.write_text('#!/bin/sh\nif [ "$1" = "--version" ]; then echo "py-spy 0.4.1"; exit 0; fi\n'
                       'echo "Error: Unsupported version of Python: 3.99.0" >&2\nexit 1\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def attach(*args: str):
    return run_bounded([PYTHON, "-m", "hangdoctor", "attach", *args], timeout=120, env=child_env(COLUMNS="120"))


def verdict_of(report: dict) -> dict:
    """What a reader must not change: the headline, each place (ranks, position, wait) and the suspects."""
    return {"headline": report["headline"],
            "places": sorted((p["folded"], p["position"], json.dumps(p["wait"], sort_keys=True))
                             for p in report["places"]),
            "suspects": sorted((s["folded"], s["kind"]) for s in report["suspects"])}


def test_a_hung_gloo_job_read_by_pystack_where_py_spy_fails_gets_the_same_verdict(gloo4, failing_pyspy, tmp_path):
    by_pystack = attach("--local", "--run-id", gloo4.run_id, "--samples", "1", "--py-spy", failing_pyspy,
                        "--pystack", PYSTACK, "--out", str(tmp_path / "a"))
    by_pyspy = attach("--local", "--run-id", gloo4.run_id, "--samples", "1", "--json", "--out", str(tmp_path / "b"))
    assert by_pystack.returncode == 0 and by_pyspy.returncode == 0, by_pystack.output[-3000:] + by_pyspy.output[-3000:]
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    reference = json.loads(by_pyspy.stdout)
    assert verdict_of(report) == verdict_of(reference)
    assert {r["wait_kind"] for r in report["ranks"]} == {"collective"} and len(report["places"]) == 2, report["places"]
    assert [r["stack_by"] for r in report["ranks"]] == ["pystack"] * 4
    assert [r["stack_by"] for r in reference["ranks"]] == ["py-spy"] * 4
    assert all("Unsupported version of Python: 3.99.0" in r["error"] for r in report["ranks"])  # py-spy's, kept
    assert "stack by pystack: ranks 0-1" in by_pystack.stdout and "stack by pystack: ranks 2-3" in by_pystack.stdout
    assert "stack by" not in json.dumps(reference["places"]) and "stack by" not in by_pyspy.stderr
    doc = json.loads(next((tmp_path / "a" / "nodes").glob("*.json")).read_text())
    assert {s["reader"] for p in doc["processes"] for s in p["samples"]} == {"pystack"}


def collect(*args: str) -> tuple[int, dict]:
    done = run_bounded([*COLLECTOR, *args], timeout=60, env=child_env())
    assert done.stdout.strip(), done.stderr[-2000:]
    return done.returncode, json.loads(done.stdout)


def main_thread_names(doc: dict) -> list[str]:
    """The main thread's function names, innermost first, from the node document's tables."""
    proc = doc["processes"][0]
    pid, refs = proc["pid"], proc["samples"][-1]["threads"]
    shape = next(doc["thread_table"][ref] for ref, os_id, _ in refs if os_id == pid)
    return [doc["frame_table"][i]["name"] for i in shape["frames"]]


def test_without_py_spy_every_rank_is_read_by_pystack_and_without_either_the_node_says_so(tmp_path):
    with Procs() as procs:
        pid = procs.start("sleeper", RANK="0")
        code, doc = collect("--py-spy", str(tmp_path / "no-py-spy"), "--pystack", PYSTACK, "--pid", str(pid),
                            "--locals", "--native")
        sample = doc["processes"][0]["samples"][0]
        assert code == 0 and sample["status"] == "ok" and sample["reader"] == "pystack", sample
        assert sample["error"] == "py-spy not found on this node; stack read by pystack instead"
        names = main_thread_names(doc)
        assert "wait_here" in names and "<module>" in names
        native = [f for f in doc["frame_table"] if f["module"]]  # --native: C frames, with their library
        assert native and all(f["module"].startswith("/") for f in native)
        code, doc = collect("--py-spy", str(tmp_path / "no-py-spy"), "--pid", str(pid))
        assert code == 4 and doc["fatal"] == "pyspy-missing" and not doc["processes"]


HUNG = """\
import threading

def wait_for_peer(event):
    event.wait()

def train_step():
    wait_for_peer(threading.Event())

print("ready", flush=True)
train_step()
"""


@pytest.mark.parametrize("version", ["3.10.13", None, "3.12.1", "3.13.0"])  # None: the venv's (3.11)
def test_pystack_reads_a_hung_process_of_each_python(version, failing_pyspy, tmp_path):
    python = PYTHON if version is None else pyenv_python(version)  # pyenv's own, no venv: a bare interpreter
    script = tmp_path / "hung.py"
    script.write_text(HUNG)
    proc = subprocess.Popen([python, "-S", str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert read_line(proc, 30) == "ready"  # in train_step once it printed (read by the test, bounded)
        code, doc = collect("--py-spy", failing_pyspy, "--pystack", PYSTACK, "--pid", str(proc.pid), "--locals")
    finally:
        proc.kill()
        proc.wait(timeout=30)
    sample = doc["processes"][0]["samples"][0]
    assert code == 0 and sample["status"] == "ok" and sample["reader"] == "pystack", sample
    assert "Unsupported version of Python" in sample["error"]
    names = main_thread_names(doc)
    assert names[names.index("wait_for_peer"):] == ["wait_for_peer", "train_step", "<module>"], names
    frames = {f["name"]: f for f in doc["frame_table"]}
    assert frames["wait_for_peer"]["short_filename"].endswith("hung.py") and frames["wait_for_peer"]["line"] == 4
    assert [local["name"] for local in frames["wait_for_peer"]["locals"]] == ["event"]
    assert frames["wait"]["short_filename"] == "threading.py"  # the standard library's, as py-spy names it
