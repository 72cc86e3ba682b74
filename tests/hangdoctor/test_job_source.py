"""`analyze` reads the frames' source lines from the job's code on this machine (formats/job_source.py): a wait in
a C call with no Python frame of its own (time.sleep, store.wait, `with lock:`) is told from its caller's line,
as attach tells it on the node, and a file edited since the dump is not read."""

import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console

from hangdoctor.analysis.frameworks import SOURCE_RULES
from hangdoctor.cli import main

REPO = Path(__file__).resolve().parents[2]
CASE = REPO / "tests/hangdoctor/corpus/fdt_spawn_download_backoff_sleep"  # rank 2 sleeps in time.sleep (C)
PROGRAM = "tests/hangdoctor/fixtures/corpus/fdt_spawn_download_backoff_sleep.py"


def analyze(*argv) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["analyze", *map(str, argv), "--json"], out=Console(file=out, width=200),
                err=Console(file=err, width=200))
    return code, (json.loads(out.getvalue()) if out.getvalue().strip() else {}), err.getvalue()


def kinds(verdict: dict) -> dict:
    return {r["rank"]: r["activity"] for r in verdict["ranks"]}


def test_a_sleep_in_c_is_read_from_its_callers_line_in_the_jobs_code():
    dumps = [CASE / "text/s1", CASE / "text/s2"]
    _, blind, _ = analyze(*dumps, "--no-source")
    _, seen, _ = analyze(*dumps, "--source", REPO)
    assert kinds(blind)[2] != "sleep"
    assert kinds(seen)[2] == "sleep" and seen["suspects"][0]["folded"] == "2"
    assert any(re.match(r"read \d+ source lines? of the frames from 1 file on this machine", w) for w in seen["warnings"])
    # py-spy's JSON names the file by its absolute path where the job ran (another checkout): found by its tail
    _, json_form, _ = analyze(CASE / "json", "--source", REPO)
    assert kinds(json_form)[2] == "sleep"


def test_a_file_edited_since_the_dump_is_not_read(tmp_path):
    edited = tmp_path / PROGRAM
    edited.parent.mkdir(parents=True)
    text = (REPO / PROGRAM).read_text()
    edited.write_text("\n" * 7 + text)  # every function seven lines further down: the frames' lines miss them
    _, verdict, _ = analyze(CASE / "text/s1", CASE / "text/s2", "--source", tmp_path)
    assert kinds(verdict)[2] != "sleep"
    assert any("differ from the code that ran" in w and str(edited) in w for w in verdict["warnings"])
    assert not any(w.startswith("read ") for w in verdict["warnings"])


def test_the_scripts_folder_is_read_without_being_asked_and_never_with_no_source(tmp_path):
    """A real py-spy dump of a process whose command line names its script by an absolute path; its frames name
    the file relative to the folder it was started from."""
    script = tmp_path / "proj" / "jobs" / "poll.py"
    script.parent.mkdir(parents=True)
    script.write_text("import sys, time\n\n\ndef wait_for_flag():\n    print('up', flush=True)\n"
                      "    time.sleep(120)\n\n\nwait_for_flag()\n")
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path / "proj", stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        time.sleep(0.2)
        pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        dump = subprocess.run([pyspy, "dump", "--pid", str(proc.pid)], capture_output=True, text=True, timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert "wait_for_flag" in dump.stdout, dump.stderr
    (tmp_path / "dump.txt").write_text(dump.stdout)
    _, asked_not, _ = analyze(tmp_path / "dump.txt")
    _, blind, _ = analyze(tmp_path / "dump.txt", "--no-source")
    assert kinds(asked_not)[0] == "sleep", asked_not["warnings"]
    assert kinds(blind)[0] != "sleep"


def test_a_source_that_is_not_a_folder_is_refused_in_one_line(tmp_path):
    code, verdict, err = analyze(CASE / "json", "--source", tmp_path / "nowhere")
    assert code == 2 and not verdict
    assert "--source" in err and "not a folder" in err and "Traceback" not in err


def test_a_strings_join_is_no_thread_join():
    rule = next(r for r in SOURCE_RULES if r[2] == "thread wait" and "acquire" in r[1])
    waits = ["worker.join()", "proc.join(timeout=5)", "q.join( )", "t.join(2.5)", "t.join(self.join_timeout)",
             "lock.acquire()"]
    parts = ['name = ",".join(parts)', "path = os.path.join(root, name)", "f = self.SEP.join((a, b))"]
    assert all(re.search(rule[1], line) for line in waits)
    assert not any(re.search(rule[1], line) for line in parts)


def test_a_peer_written_as_a_number_in_the_calls_line_is_read_from_the_jobs_code():
    # rank 0 waits in dist.recv(grad, src=1) for a send rank 1 skipped; ranks 1 and 2 wait in one barrier with one
    # stack. Without locals only the call's own line says which of them rank 0 waits for (fer_pp_input_*).
    case = REPO / "tests/hangdoctor/corpus/fer_pp_input_no_grad_skip_send"
    dumps = [case / "text/s1", case / "text/s2"]
    _, blind, _ = analyze(*dumps, "--no-source")
    _, seen, _ = analyze(*dumps, "--source", REPO)
    assert blind["suspects"][0]["folded"] != "1" and blind["suspects"][0]["confidence"] == "low"
    first = seen["suspects"][0]
    assert (first["folded"], first["confidence"]) == ("1", "medium")
    assert "src=1 in its call's source line" in first["reason"]
    assert not any(0 in s["ranks"] and s["confidence"] != "low" for s in seen["suspects"])


def test_a_lock_the_waiting_thread_already_holds_is_said_to_be_a_self_deadlock():
    # rank 0's future callback runs inline under UploadTracker.finish's `with self._lock:` and asks for the lock
    # again (fcw_future_callback_lock_reentry); the blocks read from the job's code say which lock each `with` takes
    case = REPO / "tests/hangdoctor/corpus/fcw_future_callback_lock_reentry"
    _, blind, _ = analyze(case / "text/s1", case / "text/s2", "--no-source")
    _, seen, _ = analyze(case / "text/s1", case / "text/s2", "--source", REPO)
    assert "self-deadlock" not in blind["suspects"][0]["reason"]
    first = seen["suspects"][0]
    assert first["folded"] == "0" and "its own thread already holds `self._lock`: UploadTracker.finish (" in \
        first["reason"] and "inside the `with self._lock:` of line 43" in first["reason"]
    # another spelling of one lock (`monitor.lock` held in main, `self.lock` wanted in the hook): not said, the text
    # cannot tell it is the same object
    other = REPO / "tests/hangdoctor/corpus/fen_ddp_grad_hook_stats_lock"
    _, hook, _ = analyze(other / "text/s1", other / "text/s2", "--source", REPO)
    assert hook["suspects"][0]["folded"] == "2" and "self-deadlock" not in hook["suspects"][0]["reason"]


def test_each_with_statement_says_what_it_enters():
    from hangdoctor.collector.source import blocks_at, ranges_of

    code = b"def f(self):\n    with self._lock, open(p) as h:\n        g()\n"
    assert blocks_at(ranges_of(code), 3)["with_items"] == [[2, 3, ["self._lock", "open(p)"]]]
