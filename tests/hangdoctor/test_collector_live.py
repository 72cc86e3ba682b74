"""The per-node collector against real processes: found by environment, launchers set aside, every status
(ok, not Python, stopped, D state, gone, ptrace denied, timeout) reported within its bound."""

import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from hangdoctor.collector import compact, dump, node
from hangdoctor.collector.options import CollectOptions, Selection
from hangdoctor.collector.procs import find_ranks
from tests.hangdoctor.livejobs import Procs, proc_state, wait_until
from tests.support import PYTHON, REPO, child_env, run_bounded

PYSPY = shutil.which("py-spy") or str(Path(PYTHON).parent / "py-spy")
COLLECTOR = [PYTHON, "-m", "hangdoctor.collector", "--py-spy", PYSPY]


def collect(*args: str, timeout: float = 60, python: list[str] | None = None) -> dict:
    result = run_bounded([*(python or COLLECTOR[:3]), *COLLECTOR[3:], *args], timeout=timeout, env=child_env())
    assert result.returncode == 0, result.output[-3000:]
    return json.loads(result.stdout)


def by_rank(doc: dict) -> dict:
    return {p["rank"]: p for p in doc["processes"]}


def test_ranks_found_by_environment_launchers_and_workers_set_aside_not_python_reported():
    with Procs() as procs:
        sleeper = procs.start("sleeper", launcher=True, RANK="0", LOCAL_RANK="0", WORLD_SIZE="3")
        forker = procs.start("forker", RANK="1", LOCAL_RANK="1", WORLD_SIZE="3")
        tail = procs.start("", argv=["tail", "-f", "/dev/null"], RANK="2", WORLD_SIZE="3")
        procs.start("sleeper", RANK="9", HDTEST="another-job")
        doc = collect("--match", f"HDTEST={procs.token}")
    ranks = by_rank(doc)
    assert sorted(ranks) == [0, 1, 2]
    assert (ranks[0]["pid"], ranks[1]["pid"], ranks[2]["pid"]) == (sleeper, forker, tail)
    assert ranks[0]["env"]["RANK"] == "0" and ranks[0]["world_size"] == 3 and ranks[0]["local_rank"] == 0
    assert any("(bash): launcher" in s for s in doc["skipped"]), doc["skipped"]
    assert any(f"child of rank 1 (pid {forker})" in s for s in doc["skipped"]), doc["skipped"]
    sample = ranks[0]["samples"][0]
    assert sample["status"] == "ok" and sample["state"] == "S"
    main = next(t for t in compact.expand(doc, sample) if t["os_thread_id"] == sleeper)
    assert [f["name"] for f in main["frames"][:2]] == ["wait_here", "main"]
    assert ranks[2]["samples"][0]["status"] == "not-python"
    assert "HDTEST" not in ranks[0]["env"], "only the identity variables are kept, never the whole environment"


def test_stopped_and_d_state_ranks_are_read_without_pausing_them_and_reported():
    with Procs() as procs:
        stopper = procs.start("stopper", RANK="0")
        blocked = procs.start("dstate", RANK="1")
        for pid, state in ((stopper, "T"), (blocked, "D")):
            wait_until(lambda: proc_state(pid) == state, timeout=30, what=f"pid {pid} in state {state}")
        doc = collect("--match", f"HDTEST={procs.token}", "--dump-timeout", "5")
        ranks = by_rank(doc)
        stopped, d_state = ranks[0]["samples"][0], ranks[1]["samples"][0]
        assert (stopped["status"], stopped["state"], stopped["nonblocking"]) == ("stopped", "T", True)
        assert (d_state["status"], d_state["state"], d_state["nonblocking"]) == ("d-state", "D", True)
        assert "its stack was read without pausing it" in d_state["error"]
        frames = [f["name"] for t in compact.expand(doc, d_state) for f in t["frames"]]
        assert "hold_in_d_state" in frames
        assert proc_state(stopper) == "T" and proc_state(blocked) == "D", "the collector left them as they were"


def pyspys_aimed_at(pid: int) -> list[int]:
    """py-spy processes still running with `--pid PID` on their command line."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{name}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"py-spy") and str(pid).encode() in argv:
            found.append(int(name))
    return found


def test_a_blocking_dump_of_a_d_state_process_times_out_within_its_bound():
    with Procs() as procs:
        blocked = procs.start("dstate", RANK="0")
        wait_until(lambda: proc_state(blocked) == "D", timeout=30, what=f"pid {blocked} in state D")
        result = dump.dump_process(PYSPY, blocked, timeout=2.0, nonblocking=False)
        assert result["status"] == dump.TIMEOUT and "did not answer within 2s" in result["error"]
        wait_until(lambda: pyspys_aimed_at(blocked) == [], timeout=30,
                   what="the py-spy that timed out killed, not left behind")
        assert proc_state(blocked) == "D"


def test_a_process_that_exited_is_gone(tmp_path):
    zombie = subprocess.Popen([PYTHON, "-c", "pass"])  # not waited for: a zombie until the end of the test
    wait_until(lambda: proc_state(zombie.pid) == "Z", timeout=30, what=f"pid {zombie.pid} exited (a zombie)")
    doc = node.collect(CollectOptions(pyspy=PYSPY), Selection(pids=[zombie.pid]))
    assert doc["processes"][0]["samples"][0]["status"] == "gone"
    zombie.wait()
    doc = node.collect(CollectOptions(pyspy=PYSPY), Selection(pids=[zombie.pid]))
    assert doc["errors"] == [f"pid {zombie.pid}: no such process"]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser") or not os.path.exists("/usr/bin/python3"),
                    reason="needs root, runuser and a system python3 to act as another user")
def test_another_users_process_is_ptrace_denied():
    """The collector runs as `nobody` from a world-readable copy of the packages it needs (the checkout itself may
    be private, as in a `mktemp -d` clone), which also checks that it needs nothing else on a node."""
    folder = Path(tempfile.mkdtemp(prefix="hd-ptrace-"))
    try:
        os.chmod(folder, 0o755)
        for package in ("hangdoctor", "slurm"):
            shutil.copytree(REPO / package, folder / package, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(PYSPY, folder / "py-spy")
        os.chmod(folder / "py-spy", stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        with Procs() as procs:
            root_rank = procs.start("sleeper", RANK="0")
            result = run_bounded(["runuser", "-u", "nobody", "--", "/usr/bin/python3",
                                  str(folder / "hangdoctor" / "collector" / "__main__.py"), "--py-spy",
                                  str(folder / "py-spy"), "--pid", str(root_rank)], timeout=60, env=child_env())
        assert result.returncode == 0, result.output
        sample = json.loads(result.stdout)["processes"][0]["samples"][0]
        assert sample["status"] == "ptrace-denied", sample
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_collector_runs_by_file_path_under_an_older_python():
    older = sorted(Path(os.path.expanduser("~/.pyenv/versions")).glob("3.8*/bin/python"))
    if not older:
        pytest.skip("no Python 3.8 under pyenv")
    with Procs() as procs:
        procs.start("sleeper", RANK="0")
        doc = collect("--match", f"HDTEST={procs.token}",  # as srun and pdsh start it: by path, without site
                      python=[str(older[0]), "-S", str(REPO / "hangdoctor" / "collector" / "__main__.py")])
    assert doc["python"].startswith("3.8") and doc["processes"][0]["samples"][0]["status"] == "ok"


def test_out_into_a_fifo_writes_into_it_and_leaves_it_a_fifo(tmp_path):
    """--out /dev/null or a pipe must be written into, never replaced by a renamed file (an atomic rename over
    /dev/null once turned it into a regular file)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with Procs() as procs:
        procs.start("sleeper", RANK="0")
        reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
        try:
            run_bounded([*COLLECTOR, "--match", f"HDTEST={procs.token}", "--out", str(fifo), "--pyspy-version",
                         "9.9.9"], timeout=60, env=child_env())
            text, _ = reader.communicate(timeout=30)
        finally:
            reader.kill()
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and sorted(os.listdir(tmp_path)) == ["pipe"]
    doc = json.loads(text)
    assert doc["processes"][0]["rank"] == 0 and doc["pyspy"]["version"] == "9.9.9"  # given: py-spy not asked


def test_repeated_samples_and_cpu_use():
    with Procs() as procs:
        procs.start("sleeper", RANK="0")
        procs.start("mover", RANK="1")
        doc = collect("--match", f"HDTEST={procs.token}", "--samples", "3", "--interval", "0.3")
    ranks = by_rank(doc)
    assert [len(ranks[r]["samples"]) for r in (0, 1)] == [3, 3]
    depth = [len(next(t for t in compact.expand(doc, s) if t["thread_name"] == "MainThread")["frames"])
             for s in ranks[1]["samples"]]
    assert depth[0] < depth[1] < depth[2], f"the mover goes deeper between samples: {depth}"
    assert all(s["cpu_percent"] is not None for r in (0, 1) for s in ranks[r]["samples"])


def test_chunked_output_survives_transports_that_cut_long_lines():
    with Procs() as procs:
        procs.start("mover", RANK="0")
        result = run_bounded([*COLLECTOR, "--match", f"HDTEST={procs.token}", "--chunked", "--node", "nX"],
                             timeout=60, env=child_env())
    lines = result.stdout.splitlines()
    assert len(lines) > 1 and all(len(line) < 1000 for line in lines)
    from slurm.frames import decode
    records, broken = decode(f"nX: {line}" for line in lines)  # as pdsh prefixes them
    assert not broken and [sender for sender, _ in records] == ["nX"]
    doc = records[0][1]
    assert doc["node"] == "nX" and doc["processes"][0]["rank"] == 0


def test_factored_frames_give_back_pyspys_json_exactly():
    with Procs() as procs:
        pid = procs.start("mover", RANK="0")
        doc = collect("--match", f"HDTEST={procs.token}", "--samples", "2", "--interval", "0.2")
        raw = json.loads(run_bounded([PYSPY, "dump", "--json", "--pid", str(pid)], timeout=30).stdout)
    threads = [compact.expand(doc, s) for s in doc["processes"][0]["samples"]]
    assert len(doc["frame_table"]) < sum(len(t["frames"]) for sample in threads for t in sample)
    assert set(threads[0][0]) == set(raw[0]) and set(threads[0][0]["frames"][0]) == set(raw[0]["frames"][0])
    refactored = compact.factor({"processes": [{"samples": [{"pyspy_json": t} for t in threads]}]})
    again = [compact.expand(refactored, s) for s in refactored["processes"][0]["samples"]]
    assert again == threads


def test_find_ranks_leaves_out_our_own_process_tree():
    env_key = "HDTEST_SELF"
    os.environ[env_key] = "1"
    try:
        ranks, _ = find_ranks({env_key: "1"})
    finally:
        del os.environ[env_key]
    assert all(r["pid"] != os.getpid() for r in ranks)
