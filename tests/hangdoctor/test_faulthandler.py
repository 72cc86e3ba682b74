"""Python's own traceback dumps (faulthandler's format) read as stacks: what people have when py-spy was not
there (PYTHONFAULTHANDLER on a crash, faulthandler.register(SIGUSR1) and `kill -USR1`, a torch debug server).
The dumps here are made by real Python processes with faulthandler.dump_traceback while they block."""

import json
import subprocess
import sys
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
    assert "no Python frame in it" in capsys.readouterr().err
