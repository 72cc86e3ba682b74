"""`hangdoctor watch` on this machine (--pid): real processes (fixtures/watch_job.py printing Megatron-format
iteration lines), the real `attach` on a stall, real files. The SLURM side is in test_watch_slurm.py.

Stall detection and log following are pure and tested with given times; the live runs use bounds of seconds
and assert what was recorded, never how long anything took."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hangdoctor.throughput.logtail import LogTail
from hangdoctor.throughput.progress import HeartbeatProgress, LogProgress, compile_iteration_regex, iteration_of
from hangdoctor.throughput.stall import StallClock
from tests.support import PYTHON, REPO, child_env, kill_tree, run_bounded

JOB = Path(__file__).parent / "fixtures" / "watch_job.py"
LINE = " iteration        7/      20 | consumed samples: 56 | elapsed time per iteration (ms): 200.0 | lm loss: 7.1E-01 |"


def test_stall_bound_is_startup_then_fixed_or_derived_from_the_run():
    fixed = StallClock(startup=100.0, stall=30.0)
    assert fixed.bound() == 100.0 and not fixed.check(100.0) and fixed.check(100.5)
    assert not fixed.check(200.0), "a stall is declared once"
    assert fixed.progress(210.0) == 210.0, "cleared: it lasted from the start to the first sign"
    assert fixed.bound() == 30.0 and not fixed.check(240.0) and fixed.check(240.5)

    derived = StallClock(startup=900.0, factor=10.0, floor=60.0)
    for t in (0.0, 10.0, 20.0, 30.0):  # signs every 10 s: 3 intervals of 10 s
        derived.progress(t)
    assert derived.bound() == 100.0  # 10 x the median interval, above the floor
    assert not derived.check(130.0) and derived.check(130.1)
    assert derived.progress(170.0) == 140.0  # the stall cleared after 140 s of silence
    assert derived.intervals == [10.0, 10.0, 10.0], "a stall's silence is not an iteration time"
    slow = StallClock(startup=900.0, factor=10.0, floor=60.0)
    for t in (0.0, 1.0, 2.0, 3.0):
        slow.progress(t)
    assert slow.bound() == 60.0, "never under the floor"


def test_log_tail_follows_truncation_and_rotation_and_never_reads_a_fifo(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("a\nb\npart")
    tail = LogTail(log)
    assert tail.new_lines() == ["a", "b"] and tail.take_events() == []
    log.write_text("c\n")  # truncated (shorter than what was read), then written again
    assert tail.new_lines() == ["c"] and tail.take_events() == ["truncated"]
    log.rename(tmp_path / "train.log.1")
    log.write_text("d\ne\n")  # rotated: a new file at the same path
    assert tail.new_lines() == ["d", "e"] and tail.take_events() == ["rotated"]
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    fifo_tail = LogTail(fifo)
    assert fifo_tail.new_lines() == [] and fifo_tail.take_events() == ["not a regular file"]


def test_a_progress_bar_redrawn_with_carriage_returns_is_progress_and_its_line_stays_bounded(tmp_path):
    """tqdm writes "\r 41%|####| 41/100" with no newline until the end: each redraw is progress (sweep round 2:
    read as one unfinished line, a false stall, and a line buffer that grew without bound)."""
    log = tmp_path / "train.log"
    log.write_bytes(b"".join(f"\r step {i}/100 |{'#' * i}".encode() for i in range(1, 41)))
    progress = LogProgress(log, compile_iteration_regex(r"step (\d+)"), from_end=False)
    assert [s.iteration for s in progress.poll(1.0)] == list(range(1, 40)), "each finished redraw; the 40th is open"
    with open(log, "ab") as handle:
        handle.write(b"\r step 41/100 |\r\n")
        handle.write(b"x" * (3 << 20))  # a line that never ends
    assert [s.iteration for s in progress.poll(2.0)] == [40, 41]
    for _ in range(3):
        progress.poll(3.0)
    assert len(progress.tail.partial) <= 1 << 20


def test_progress_is_a_higher_iteration_megatron_or_regex(tmp_path):
    assert iteration_of(LINE, None) == 7
    assert iteration_of("step 12 loss 3.1", compile_iteration_regex(r"step (\d+)")) == 12
    assert iteration_of("epoch 3", compile_iteration_regex(r"step (\d+)")) is None
    with pytest.raises(ValueError, match="iteration-regex"):
        compile_iteration_regex("step (")
    log = tmp_path / "log"
    log.write_text(LINE + "\n")
    progress = LogProgress(log, from_end=False)
    assert [s.iteration for s in progress.poll(1.0)] == [7]
    with open(log, "a") as handle:
        handle.write(LINE + "\n" + LINE.replace("7/", "8/") + "\n")
    assert [s.iteration for s in progress.poll(2.0)] == [8], "a repeated line is not progress"


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} not reached within {timeout:.0f}s"
        time.sleep(0.1)


def start_job(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / "train.log"
    handle = open(log, "ab")  # appended, as `>> train.log`: a truncation by the test is followed by the job
    proc = subprocess.Popen([PYTHON, "-u", str(JOB), *args], stdout=handle, stderr=subprocess.STDOUT,
                            env=child_env(), start_new_session=True)
    handle.close()
    return proc, log


def watch(tmp_path: Path, *args: str, timeout: float = 120):
    on_hang = tmp_path / "on_hang.py"
    on_hang.write_text("import json, sys\nopen(sys.argv[1] + '.called', 'w').write(json.dumps(sys.argv[2:]))\n")
    return run_bounded([PYTHON, "-m", "hangdoctor", "watch", *args, "--out", str(tmp_path / "watch"),
                        "--poll", "0.3", "--samples", "2", "--interval", "0.5", "--timeout", "20",
                        "--on-hang", f"{sys.executable} {on_hang} {tmp_path / 'hook'}"],
                       timeout=timeout, env=child_env(), cwd=REPO)


def events(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "watch" / "watch.jsonl").read_text().splitlines()]


def test_a_straggler_is_reported_once_then_resumed_and_the_watch_ends_with_the_job(tmp_path):
    proc, log = start_job(tmp_path, "--iters", "25", "--step", "0.2", "--stall-at", "6", "--stall-for", "8")
    try:
        result = watch(tmp_path, "--pid", str(proc.pid), "--stall", "3")
    finally:
        kill_tree(proc.pid)
    assert result.returncode == 1, result.output[-3000:]  # a stall was reported
    kinds = [e["event"] for e in events(tmp_path)]
    assert kinds == ["stall", "on-hang", "resumed", "ended"], kinds
    stall, _, resumed, ended = events(tmp_path)
    assert stall["iteration"] == 5 and stall["silent_seconds"] >= 3
    report = Path(stall["report"])
    assert report.parent == tmp_path / "watch" and report.name.startswith("hang-")
    verdict = json.loads((report / "report.json").read_text())
    assert verdict["ranks"][0]["pid"] == proc.pid and (report / "nodes").is_dir()
    assert json.loads((tmp_path / "hook.called").read_text()) == [str(report)], "--on-hang got the report folder"
    assert resumed["iteration"] == 6 and resumed["seconds"] > 3
    assert "ended" in ended["text"]
    assert f"verdict in {report}/" in result.stdout and "resumed after" in result.stdout
    assert len([p for p in (tmp_path / "watch").iterdir() if p.name.startswith("hang-")]) == 1, "no second report"


def test_a_watch_started_in_a_silence_counts_it_from_the_last_line_before_it_began(tmp_path):
    """The job is already 1.5 s into an 8 s stall when the watch begins: the log's last iteration line, dated by
    the log's modification time, is where the silence started (without it the watch waited for a next line, and
    the 900 s startup bound, before it could call anything a stall)."""
    proc, log = start_job(tmp_path, "--iters", "8", "--step", "0.2", "--stall-at", "4", "--stall-for", "8")
    try:
        wait_until(lambda: " iteration        3/" in log.read_text(), 30, "the job's third line")
        time.sleep(1.5)
        result = watch(tmp_path, "--pid", str(proc.pid), "--stall", "3")
    finally:
        kill_tree(proc.pid)
    assert result.returncode == 1, result.output[-3000:]
    assert "last iteration 3 " in result.stdout and "before the watch began" in result.stdout
    stall, _, resumed, _ = events(tmp_path)
    assert (stall["event"], stall["iteration"]) == ("stall", 3) and stall["silent_seconds"] >= 3
    assert resumed["event"] == "resumed" and resumed["iteration"] == 4 and resumed["seconds"] > 6


def test_seeds_are_the_last_iteration_line_and_the_heartbeat_dated_by_their_files(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(LINE + "\n" + LINE.replace(" 7/", " 8/") + "\nsaving checkpoint\npartial line, no newline")
    os.utime(log, (time.time() - 40, time.time() - 40))
    seeded = LogProgress(log).seed(1000.0)
    assert seeded.iteration == 8 and 1000.0 - seeded.time == pytest.approx(40, abs=2)
    assert LogProgress(log).poll(1001.0) == [], "the lines before the watch are not news"
    (tmp_path / "empty.log").write_text("starting\n")
    assert LogProgress(tmp_path / "empty.log").seed(5.0) is None
    assert LogProgress(tmp_path / "absent.log").seed(5.0) is None
    beat = tmp_path / "beat"
    assert HeartbeatProgress(beat).seed(5.0) is None
    beat.touch()
    os.utime(beat, (time.time() - 10, time.time() - 10))
    assert 100.0 - HeartbeatProgress(beat).seed(100.0).time == pytest.approx(10, abs=2)


def test_a_truncated_log_is_followed_and_said(tmp_path):
    proc, log = start_job(tmp_path, "--iters", "30", "--step", "0.2")
    try:
        watcher = subprocess.Popen([PYTHON, "-m", "hangdoctor", "watch", "--pid", str(proc.pid), "--log", str(log),
                                    "--stall", "30", "--poll", "0.2", "--out", str(tmp_path / "watch")],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env(),
                                   cwd=REPO)
        wait_until(lambda: log.stat().st_size > 600, 30, "the job's fifth line")
        log.write_bytes(b"")  # truncated under the running job (logrotate's copytruncate)
        out, _ = watcher.communicate(timeout=60)
    finally:
        kill_tree(proc.pid)
    assert watcher.returncode == 0, out[-2000:]  # the job ended, no stall
    assert f"Warning: log {log} was truncated; following it from its start" in out
    assert [e["event"] for e in events(tmp_path)][-1] == "ended"


@pytest.mark.parametrize("args, code, message", [
    (["--pid", "999999999"], 3, "no process 999999999"),
    (["--pid", "{pid}", "--log", "{tmp}/missing.log"], 3, "missing.log: no such file"),
    (["--pid", "{pid}"], 3, "nothing shows this job's progress"),
    (["--pid", "{pid}", "--log", "{tmp}", "--stall", "5"], 2, "not a regular file"),
    (["--pid", "{pid}", "--heartbeat", "{tmp}/none"], 3, "heartbeat"),
    (["--pid", "{pid}", "--iteration-regex", "step ("], 2, "--iteration-regex"),
    (["--pid", "{pid}", "--on-hang", ""], 2, "--on-hang is empty"),
    (["--pid", "{pid}", "--on-hang", "notify 'unclosed"], 2, "--on-hang"),
    (["--pid", "{pid}", "--stall", "nan"], 2, "positive, finite"),
    (["--pid", "{pid}", "--poll", "inf"], 2, "positive, finite"),
    (["--jobid", "12; rm -rf /"], 2, "is not a SLURM job id"),
    (["--pid", "{pid}", "--samples", "5", "--interval", "30", "--timeout", "60"], 2, "does not fit"),
])
def test_bad_input_is_one_line(tmp_path, args, code, message):
    sleeper = subprocess.Popen([PYTHON, "-c", "import time; time.sleep(60)"], stdout=subprocess.DEVNULL)
    try:
        argv = [a.format(pid=sleeper.pid, tmp=tmp_path) for a in args]
        result = run_bounded([PYTHON, "-m", "hangdoctor", "watch", *argv, "--out", str(tmp_path / "w")],
                             timeout=60, env=child_env(), cwd=REPO)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert result.returncode == code, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in result.stderr, result.stderr


def test_completing_is_not_the_end_until_the_final_state_or_the_bound():
    """COMPLETING carries no final state or exit code yet (seen on the busy test cluster: a cancelled job read
    as 'ended: COMPLETING'): the watch waits for CANCELLED/FAILED, at most ENDING_LIMIT seconds. The scontrol
    text is the recorded one with its state and exit code replaced: COMPLETING cannot be held on demand."""
    from slurm.jobstate import DONE, ENDING, ENDING_LIMIT, RUNNING, SlurmJobState
    from slurm.jobs import parse_show_job

    recorded = (REPO / "tests" / "slurm" / "data" / "show_job_completed.txt").read_text()

    def job_in(state: str, exit_code: str):
        return parse_show_job(recorded.replace("JobState=COMPLETED", f"JobState={state}")
                              .replace("ExitCode=0:0", f"ExitCode={exit_code}"))[0]

    answers = iter([job_in("RUNNING", "0:0"), job_in("COMPLETING", "0:0"), job_in("COMPLETING", "0:0"),
                    job_in("FAILED", "1:0")])
    t = [0.0]
    state = SlurmJobState("3", show=lambda *a, **k: next(answers), clock=lambda: t[0])
    seen = []
    for step in (0, 1, 30, 31):
        t[0] = step
        seen.append(state())
    assert [(s.phase, s.detail) for s in seen] == [(RUNNING, "RUNNING"), (ENDING, "COMPLETING"),
                                                   (ENDING, "COMPLETING"), (DONE, "FAILED (exit 1)")]
    stuck = SlurmJobState("3", show=lambda *a, **k: job_in("COMPLETING", "0:9"), clock=lambda: t[0])
    t[0] = 100.0
    assert stuck().phase == ENDING
    t[0] = 100.0 + ENDING_LIMIT + 1
    final = stuck()
    assert final.phase == DONE and final.exit_code == -9 and "has not released the job" in final.detail
