"""Python's own traceback dumps (faulthandler's format) read as stacks: what people have when py-spy was not
there (PYTHONFAULTHANDLER on a crash, faulthandler.register(SIGUSR1) and `kill -USR1`, a torch debug server).
The dumps here are made by real Python processes with faulthandler.dump_traceback while they block."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from hangdoctor.cli import main

WORKER = """
import faulthandler, sys, threading, time

def dump_soon(path):
    time.sleep(0.5)
    with open(path, "w") as handle:
        faulthandler.dump_traceback(file=handle, all_threads=True)

def {where}():
    time.sleep(3)

threading.Thread(target=dump_soon, args=(sys.argv[1],), daemon=True).start()
{where}()
"""


def dumps(tmp_path: Path) -> list[Path]:
    paths, procs = [], []
    for rank, where in enumerate(("wait_for_peer", "wait_for_peer", "compute_forever")):
        path = tmp_path / f"trace-n1-{rank}.txt"
        script = tmp_path / f"{where}.py"  # ranks in the same place run the same file, as a job's ranks do
        script.write_text(WORKER.format(where=where))
        procs.append(subprocess.Popen([sys.executable, str(script), str(path)]))
        paths.append(path)
    for proc in procs:
        proc.wait(timeout=30)
    return paths


def test_faulthandler_dumps_are_stacks_with_their_places(tmp_path, capsys):
    paths = dumps(tmp_path)
    assert "(most recent call first)" in paths[0].read_text()
    assert main(["analyze", *map(str, paths), "--json"]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    places = {tuple(p["ranks"]): p["position"] for p in data["places"]}
    assert set(places) == {(0, 1), (2,)}, places
    assert places[(0, 1)].startswith("outside any collective, in wait_for_peer (")
    assert places[(2,)].startswith("outside any collective, in compute_forever (")
    assert {r["rank"] for r in data["ranks"]} == {0, 1, 2} and not data["partial"]


def test_a_faulthandler_dump_without_a_python_frame_is_one_line(tmp_path, capsys):
    path = tmp_path / "empty.txt"
    path.write_text("Current thread 0x00007f3e859106c0 (most recent call first):\n  <no Python frame>\n")
    assert main(["analyze", str(path)]) == 3
    err = capsys.readouterr().err
    assert "no stack frame in it" in err and err.count("Error:") == 1


SIGNALLED = """
import faulthandler, signal, sys, threading, time

log = open(sys.argv[1], "a")
faulthandler.register(signal.SIGUSR1, file=log, all_threads=True)  # `kill -USR1` writes the dump to the shared log
threading.Thread(target=lambda: time.sleep(60), daemon=True).start()
open(sys.argv[2], "w").close()

def {where}():
    time.sleep(60)

{where}()
"""


def test_several_ranks_dumps_in_one_shared_log_are_several_ranks(tmp_path, capsys):
    """Three ranks share one stderr log; `kill -USR1` to each appends its dump (the signal handler runs in the
    main thread, the current one). They were read as one rank (sweep round 2): now three, the odd one named."""
    log = tmp_path / "job.log"
    procs = []
    try:
        for rank, where in enumerate(("wait_for_peer", "compute_forever", "wait_for_peer")):
            script = tmp_path / f"{where}.py"
            script.write_text(SIGNALLED.format(where=where))
            ready = tmp_path / f"ready{rank}"
            procs.append(subprocess.Popen([sys.executable, str(script), str(log), str(ready)]))
            for _ in range(100):
                if ready.exists():
                    break
                time.sleep(0.1)
            time.sleep(0.2)
            procs[-1].send_signal(signal.SIGUSR1)
            time.sleep(0.5)  # its dump is written before the next rank's
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=30)
    assert main(["analyze", str(log), "--json"]) in (0, 1)
    out = capsys.readouterr()
    data = json.loads(out.out)
    places = {tuple(p["ranks"]): p["position"] for p in data["places"]}
    assert set(places) == {(0, 2), (1,)}, places
    assert places[(1,)].startswith("outside any collective, in compute_forever (")
    assert "3 processes' Python dumps in one file, read as 3 ranks" in out.err


REPEATING = """
import faulthandler, sys, threading, time

log = open(sys.argv[1], "a")
threading.Thread(target=lambda: time.sleep(60), daemon=True).start()
time.sleep({offset})
faulthandler.dump_traceback_later(1, repeat=True, file=log)  # a dump every second, into the shared log

def {where}():
    {body}

{where}()
"""


def test_a_dump_that_repeats_is_samples_of_one_process_not_more_ranks(tmp_path, capsys):
    """faulthandler.dump_traceback_later(repeat=True), the usual way to watch a hang without py-spy: two ranks
    append a dump every second to one log. Each rank's rounds (the same thread ids, again) were read as that many
    ranks; they are samples of it: the rank that sleeps in one call is stuck, the one that moves is not."""
    log = tmp_path / "job.log"
    bodies = {"wait_for_peer": "time.sleep(60)",
              "compute_steps": "while True:\n        sum(range(10**5)); time.sleep(0.37)"}
    procs = []
    try:
        for where, body in bodies.items():
            script = tmp_path / f"{where}.py"
            # half a second apart: dumps written at the same moment interleave (test_torn_rounds_are_set_aside)
            script.write_text(REPEATING.format(where=where, body=body, offset=0.5 * len(procs)))
            procs.append(subprocess.Popen([sys.executable, str(script), str(log)]))
        # three rounds of each (a loaded machine starts one interpreter seconds after the other), bounded
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = log.read_text() if log.exists() else ""
            if all(text.count(f"in {where}") >= 3 for where in bodies):
                break
            time.sleep(0.2)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=30)
    assert log.read_text().count("Timeout (0:00:01)!") >= 5
    assert main(["analyze", str(log), "--json"]) in (0, 1)
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert len(data["ranks"]) == 2, [r["position"] for r in data["ranks"]]
    assert "a dump that repeats:" in out.err and "samples of 2 processes" in out.err
    by_place = {r["position"].split(" (")[0]: r for r in data["ranks"]}
    stuck = by_place["outside any collective, in wait_for_peer"]
    assert stuck["samples"] >= 2 and stuck["progress"] == "stuck", stuck


def test_a_log_that_dropped_blank_lines_keeps_one_dump_one_process(tmp_path, capsys):
    """CPython separates a dump's threads by a blank line; some CI logs drop every blank line, and then each
    thread after a frame line was read as a process of its own (a seventh-batch paste: one crashed pytest read as
    three ranks). A real dump of a process with three threads, its blank lines dropped, is one process."""
    script = tmp_path / "three_threads.py"
    script.write_text(
        "import faulthandler, sys, threading, time\n"
        "for _ in range(2):\n"
        "    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "time.sleep(0.3)\n"
        "faulthandler.dump_traceback(file=sys.stderr, all_threads=True)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.stderr.count("(most recent call first)") == 3 and "\n\n" in done.stderr
    log = tmp_path / "ci.log"
    log.write_text("tests/test_io.py ....   [ 40%]\n" + "\n".join(l for l in done.stderr.splitlines() if l.strip()))
    assert main(["analyze", str(log), "--json"]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    assert len(data["ranks"]) == 1, [r["position"] for r in data["ranks"]]


def _round(threads: list[tuple[str, list[str]]]) -> list[str]:
    """One faulthandler round: per thread its header and frames (innermost first), a blank line between threads."""
    lines = ["Timeout (0:00:01)!"]
    for i, (tid, frames) in enumerate(threads):
        lines += ([""] if i else []) + [f"Thread {tid} (most recent call first):"]
        lines += [f'  File "{file}", line {n} in {name}' for file, n, name in (f.split(":") for f in frames)]
    return lines


def test_torn_rounds_are_set_aside(tmp_path, capsys):
    """Two ranks append a dump that repeats to one log at the same moment: faulthandler writes each line in pieces,
    so their lines interleave (seen in a CI run of the test above). A round torn so is neither process and no third
    one: it is set aside where both have whole rounds, and said."""
    waiting = [("0x00007f2b3a51d6c0", ["w.py:5:<lambda>", "threading.py:982:run"]),
               ("0x00007f2b3b08bb80", ["w.py:9:wait_for_peer", "w.py:11:<module>"])]
    moving = [("0x00007f662aa646c0", ["c.py:5:<lambda>", "threading.py:982:run"]),
              ("0x00007f662b5cab80", ["c.py:10:compute_steps", "c.py:12:<module>"])]
    a, b = _round(waiting), _round(moving)
    # the second time both write at once: b's main thread header lands inside a's frame line, the rest after it
    torn = a[:5] + ['  File Thread 0x"w.py", line 9 in wait_for_peer', *b[2:], "00007f2b3b08bb80"] + a[6:]
    log = tmp_path / "job.log"
    log.write_text("\n".join(a + b + torn + a + b) + "\n")
    assert main(["analyze", str(log), "--json"]) in (0, 1)
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert sorted(r["position"].split(" (")[0] for r in data["ranks"]) == [
        "outside any collective, in compute_steps", "outside any collective, in wait_for_peer"]
    assert "1 round torn by another process's writes (lines interleaved) set aside" in out.err
    assert all(r["samples"] == 2 for r in data["ranks"]), [r["samples"] for r in data["ranks"]]
