"""What people paste from wherever they got it (issue 30): each form is our own reproduction of a shape seen in
public threads (named per test), made from a dump recorded here (the ddp_barrier corpus case: rank 0 in a
barrier, ranks 1-3 in DDP's backward) or from a real process's own faulthandler or traceback output, so that the
expected reading is known."""

import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from hangdoctor.analysis.verdict import diagnose
from hangdoctor.cli import main
from hangdoctor.formats.load import load_paths
from hangdoctor.formats.text import read_text
from hangdoctor.identity import TopologyFlags
from tests.hangdoctor.test_pastes import EXPECTED, TEXT, blocks, places


def load(tmp_path: Path, text: str, name: str = "paste.txt"):
    path = tmp_path / name
    path.write_text(text)
    return load_paths([path], TopologyFlags())


def verdict(tmp_path: Path, text: str, name: str = "paste.txt"):
    return diagnose(load(tmp_path, text, name))


def main_frames(proc) -> list[str]:
    thread = next(t for t in proc.threads if t.name == "MainThread")
    return [f.name for f in thread.frames]


def test_several_headers_over_one_stack_are_that_many_processes(tmp_path):
    # a person groups identical stacks under their headers (Megatron-LM threads: 16 ranks, 3 stacks)
    parts = blocks(TEXT)
    launcher, rank0, others = parts[0], parts[1], parts[2:]
    grouped = [line for line in others[0] if line.startswith("Thread ") and "MainThread" in line]
    grouped += [next(line for line in block if line.startswith("Thread ") and "MainThread" in line) for block in others[1:]]
    stack = []
    for line in others[0][others[0].index(grouped[0]) + 1:]:
        if line.startswith("Thread "):
            break
        stack.append(line)
    text = "\n".join(launcher + rank0 + grouped + stack)
    v = verdict(tmp_path, text)
    assert places(v) == EXPECTED


def test_what_trackers_and_terminals_add_is_undone(tmp_path):
    # a GitHub comment: a fenced block, quoted in a reply, copied from a coloured terminal, HTML-escaped
    coloured = re.sub(r"^(Thread .*)$", "\x1b[1;32m\\1\x1b[0m", TEXT, flags=re.M)
    escaped = coloured.replace("<module>", "&lt;module&gt;")
    text = "\n".join("> " + line for line in ["```", *escaped.splitlines(), "```"])
    assert places(verdict(tmp_path, text)) == EXPECTED
    assert any("quote marks" in w and "markdown fences" in w for w in load(tmp_path, text).warnings)


def test_log_lines_between_dumps_are_not_frames(tmp_path):
    # a watchdog logs a line before each py-spy run (SGLang's scheduler watchdog shape)
    text = "\n".join(line if not line.startswith("Process ") else
                     f"[watchdog] dumping stacks of the scheduler (pid {line.split()[1][:-1]})\n{line}"
                     for line in TEXT.splitlines())
    assert places(verdict(tmp_path, text)) == EXPECTED and len(load(tmp_path, text).records) == 4


def test_a_label_before_a_frame_and_an_elided_line_number(tmp_path):
    # a summary written by a person (Megatron-DeepSpeed thread): group labels, then one frame with its line elided
    text = ("DP0,3,5,7:  broadcast  (torch/distributed/distributed_c10d.py:2841)\n"
            "DP1,2,4,6:  backward (torch/_tensor.py:...)\n")
    processes, notes = read_text(text)
    assert [main_frames(p) for p in processes] == [["broadcast"], ["backward"]]
    assert processes[1].threads[0].frames[0].line == 0 and not processes[1].threads[0].frames[0].native
    assert "label prefixes" in notes


def test_a_process_py_spy_could_not_suspend_is_unanswered_and_d_state_is_suggested(tmp_path):
    # an SGLang thread: one scheduler in a write that never returned; py-spy printed only its error
    second = blocks(TEXT)[2]
    text = "\n".join(blocks(TEXT)[1] + [second[0], "Error: Failed to suspend process"] + blocks(TEXT)[3])
    processes, _ = read_text(text)
    failed = [p for p in processes if p.status != "ok"]
    assert len(failed) == 1 and "D state" in failed[0].error


def faulthandler_text(tmp_path: Path) -> str:
    """A real process's faulthandler dump: a main thread in train -> all_reduce (a sleep stands for it), a
    tqdm-like monitor thread."""
    program = tmp_path / "worker.py"
    program.write_text(textwrap.dedent("""
        import faulthandler, sys, threading, time
        def monitor_run():
            time.sleep(30)
        def all_reduce():
            faulthandler.dump_traceback(sys.stdout, all_threads=True)
        def execute_model():
            all_reduce()
        threading.Thread(target=monitor_run, daemon=True).start()
        time.sleep(0.2)
        execute_model()
    """))
    return subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=60).stdout


def test_ray_prefixed_faulthandler_wrapped_at_80_columns(tmp_path):
    # vLLM on Ray: each worker's faulthandler output behind Ray's prefix, cut at 80 columns by the log monitor
    lines, dump = [], faulthandler_text(tmp_path).splitlines()
    for pid in (8812, 8813):
        for line in dump:
            pieces = [line[i:i + 80] for i in range(0, len(line), 80)] or [""]
            lines += [f"(RayWorkerWrapper pid={pid}) {piece}" for piece in pieces]
    assert len(lines) > 2 * len(dump)  # some frame lines were cut
    processes, notes = read_text("\n".join(lines))
    assert [p.pid for p in processes] == [8812, 8813]
    for proc in processes:
        assert main_frames(proc)[:3] == ["all_reduce", "execute_model", "<module>"]
    assert "pid prefixes" in notes


def test_the_thread_dump_recipe_and_tracebacks(tmp_path):
    # the "dump every thread" recipe (sys._current_frames + traceback.format_stack) pasted in many threads
    program = tmp_path / "recipe.py"
    program.write_text(textwrap.dedent("""
        import sys, threading, traceback
        def dump():
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                print(f"# Thread: {names.get(ident, '?')}({ident})")
                print("".join(traceback.format_stack(frame)))
        def barrier():
            dump()
        def train():
            barrier()
        train()
    """))
    text = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=60).stdout
    processes, notes = read_text(text)
    assert len(processes) == 1 and main_frames(processes[0]) == ["dump", "barrier", "train", "<module>"]
    assert "traceback stacks" in notes


def test_pystack_and_gdb_py_bt(tmp_path):
    # pystack's format (its documentation's shape) and gdb's py-bt (CPython's libpython.py), our own frames
    pystack = textwrap.dedent("""\
        Traceback for thread 4012 (python3) [Has the GIL] (most recent call last):
            (Python) File "/w/train.py", line 80, in <module>
                main()
            (Python) File "/w/train.py", line 50, in main
                dist.all_reduce(t)
            (C) File "???", line 0, in pthread_cond_wait (libc.so.6)
            (Python) File "/usr/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2501, in all_reduce
                work.wait()
        """)
    second_thread = textwrap.dedent("""\
        Traceback for thread 4020 (python3) [] (most recent call last):
            (Python) File "/usr/lib/python3.11/threading.py", line 1002, in _bootstrap
                self._bootstrap_inner()
            (Python) File "/usr/lib/python3.11/threading.py", line 320, in wait
                waiter.acquire()
        """)
    processes, _ = read_text(pystack + second_thread)
    assert len(processes) == 1 and len(processes[0].threads) == 2  # pystack's headers are threads of one process
    assert main_frames(processes[0])[:1] == ["all_reduce"] and main_frames(processes[0])[-1] == "<module>"
    gdb = ("#4 Frame 0x7f3c0c001a40, for file /usr/lib/python3.11/site-packages/torch/distributed/"
           "distributed_c10d.py, line 2501, in all_reduce (tensor=<Tensor at remote 0x7f3c>)\n"
           "#8 Frame 0x7f3c0c0019a0, for file /w/train.py, line 50, in main ()\n"
           "#12 Frame 0x7f3c0c001900, for file /w/train.py, line 80, in <module> ()\n")
    processes, _ = read_text(gdb)
    assert main_frames(processes[0]) == ["all_reduce", "main", "<module>"]
    # py-bt numbers the frames it cannot read (and builtins) between the others: gaps, not other threads
    gaps = gdb.replace("#8 ", "#6 (unable to read python frame information)\n#7 <built-in method wait of "
                                "Work object at remote 0x7f3c>\n#8 ")
    processes, _ = read_text(gaps)
    assert len(processes) == 1 and len(processes[0].threads) == 1
    assert main_frames(processes[0]) == ["all_reduce", "main", "<module>"]


def test_a_file_without_any_frame_is_one_error_line(tmp_path, capsys):
    path = tmp_path / "nccl.log"
    path.write_text("[rank3]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: "
                    "WorkNCCL(SeqNum=12, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.\n")
    assert main(["analyze", str(path)]) == 3
    err = capsys.readouterr().err
    assert err.count("Error:") == 1 and "no stack frame in it" in err and "Traceback" not in err


def test_ranks_names_the_processes_of_a_paste(tmp_path, capsys):
    path = tmp_path / "paste.txt"
    path.write_text(TEXT)
    assert main(["analyze", str(path), "--ranks", "8-11", "--json"]) in (0, 1)
    out = capsys.readouterr().out
    assert '"folded": "8-11"' in out
    assert main(["analyze", str(path), "--ranks", "3-x"]) == 2
    assert "bad rank range" in capsys.readouterr().err


def test_a_rank_whose_main_thread_serves_a_helper_pool_stays_a_rank(tmp_path):
    # torch.compile with inductor's subprocess pool: a thread of the rank reads the compile workers' results
    text = textwrap.dedent("""\
        Process 501: python train.py
        Python v3.11.7 (/usr/bin/python3.11)

        Thread 501 (idle): "MainThread"
            _read_thread (torch/_inductor/compile_worker/subproc_pool.py:180)
            run (threading.py:975)
        Thread 533 (idle): "forward"
            all_reduce (torch/distributed/distributed_c10d.py:2501)
            forward (model.py:40)
            train (train.py:50)

        Process 502: python -m multiprocess.pool
        Python v3.11.7 (/usr/bin/python3.11)

        Thread 502 (idle): "MainThread"
            worker (multiprocess/pool.py:114)
            run (multiprocess/process.py:108)
            _bootstrap (multiprocess/process.py:314)
        """)
    collection = load(tmp_path, text)
    assert [r.identity.pid for r in collection.records] == [501]
    assert [a.pid for a in collection.set_aside] == [502]


def test_a_watchdog_running_py_spy_is_not_a_rank(tmp_path):
    text = textwrap.dedent("""\
        Thread 700 (idle): "MainThread"
            communicate (subprocess.py:1209)
            pyspy_dump_schedulers (sglang/srt/utils.py:2100)
            watchdog_thread (sglang/srt/managers/scheduler.py:1500)
            <module> (sglang/launch_server.py:14)
        Thread 701 (idle): "MainThread"
            broadcast (torch/distributed/distributed_c10d.py:2841)
            event_loop_normal (sglang/srt/managers/scheduler.py:600)
            <module> (sglang/launch_server.py:14)
        """)
    collection = load(tmp_path, text)
    assert [r.identity.pid for r in collection.records] == [701]
    assert "py-spy" in collection.set_aside[0].why


def test_lightning_and_openmpi_rank_prefixes(tmp_path):
    # Lightning's rank_prefixed_message `[rank: 3]` and `mpirun --tag-output`'s `[1,3]<stdout>:`
    for prefix in ("[rank: {r}] ", "[1,{r}]<stdout>:"):
        lines = []
        for r, block in enumerate(blocks(TEXT)[1:]):
            lines += [prefix.format(r=r) + line for line in block]
        processes, _ = read_text("\n".join(lines))
        assert [p.rank for p in processes] == [0, 1, 2, 3], prefix
        assert [main_frames(p)[0] for p in processes] == ["barrier"] + ["_engine_run_backward"] * 3, prefix


def test_a_compressed_dump_is_named_as_such(tmp_path, capsys):
    import gzip

    path = tmp_path / "trace-node1.out"
    path.write_bytes(gzip.compress(TEXT.encode()))
    assert main(["analyze", str(path)]) == 3
    err = capsys.readouterr().err
    assert err.count("Error:") == 1 and "gzip-compressed file, not a dump: decompress it first" in err


def test_a_ray_driver_and_its_actors_traceback_are_two_processes(tmp_path):
    # a RayTaskError: the driver's traceback in ray.get, then the actor's own (ROLL's and verl's threads' shape)
    text = textwrap.dedent("""\
        Traceback (most recent call last):
          File "/w/main.py", line 9, in <module>
            main()
          File "/w/main.py", line 5, in main
            ray.get(worker.setup.remote())
          File "/py/ray/_private/worker.py", line 2822, in get
            values = worker.get_objects(object_refs)
          File "/py/ray/_private/worker.py", line 930, in get_objects
            raise value.as_instanceof_cause()
        ray.exceptions.RayTaskError(RuntimeError): ray::Worker.setup() (pid=4821, ip=10.0.0.5, actor_id=ab12)
          File "/w/worker.py", line 40, in setup
            dist.barrier()
          File "/py/torch/distributed/distributed_c10d.py", line 4000, in barrier
            work.wait()
        RuntimeError: [Rank 3] Timed out waiting 600000ms
        """)
    processes, _ = read_text(text)
    assert [main_frames(p) for p in processes] == [["get_objects", "get", "main", "<module>"], ["barrier", "setup"]]
    assert processes[1].rank == 3  # named by its own exception
    collection = load(tmp_path, text)
    assert [a.why for a in collection.set_aside] == ["Ray driver (ray.get) (its stack)"]
    assert [r.identity.rank for r in collection.records] == [3]


def test_a_timestamp_on_every_line_keeps_the_traceback_s_own_indentation(tmp_path):
    """A container log stamps every line (verl#2355's shape: RFC 3339 with nanoseconds); stripping the stamp ate
    the indentation too, so each source line under a frame read as text between frames, and the traceback of one
    process (`python -m` through runpy, then the script's <module>) was cut into two processes."""
    (tmp_path / "driver.py").write_text("def run():\n    raise RuntimeError('the actor died')\n\nrun()\n")
    launch = tmp_path / "launch.py"  # runs the script as runpy does: exec of its code, a <module> under a <module>
    launch.write_text("source = open('driver.py').read()\nexec(compile(source, 'driver.py', 'exec'))\n")
    trace = subprocess.run([sys.executable, str(launch)], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60).stderr
    assert trace.count("in <module>") == 2 and "    exec(compile(" in trace
    stamped = "\n".join(f"2025-07-03T14:20:51.{i:09d}Z {line}" for i, line in enumerate(trace.splitlines()))
    processes, notes = read_text(stamped)
    assert len(processes) == 1, [main_frames(p) for p in processes]
    assert main_frames(processes[0]) == ["run", "<module>", "<module>"] and "timestamps" in notes


def test_a_frame_glued_to_the_line_before_it_is_still_a_frame(tmp_path):
    """A paste that lost a line break (pytorch#53395's shape: a source line and the next `File` line on one line):
    the frame in the middle of a line was lost. Frames are found by their shape anywhere in a line."""
    (tmp_path / "job.py").write_text("def inner():\n    raise TimeoutError('socket')\n\ndef outer():\n"
                                     "    inner()\n\nouter()\n")
    trace = subprocess.run([sys.executable, "job.py"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60).stderr.splitlines()
    at = next(i for i, line in enumerate(trace) if line.strip() == "inner()")  # outer's source line
    glued = trace[:at] + [trace[at] + "  " + trace[at + 1].strip()] + trace[at + 2:]
    processes, _ = read_text("\n".join(glued))
    assert len(processes) == 1 and main_frames(processes[0]) == ["inner", "outer", "<module>"]


def test_the_main_thread_named_last_under_thread_reprs_is_the_main_thread(tmp_path):
    """sys._current_frames() printed under each Thread's repr, workers first (mozillazg's recipe): a text names no
    pid, so the threads are counted from 0, and the thread counted 0 (a worker) was taken for the process's main
    thread, as if its id were the pid."""
    program = tmp_path / "dump_threads.py"
    program.write_text(textwrap.dedent("""
        import sys, threading, time, traceback
        def do():
            time.sleep(30)
        for _ in range(2):
            threading.Thread(target=do, daemon=True).start()
        time.sleep(0.2)
        by_ident = {t.ident: t for t in threading.enumerate()}
        for ident, frame in sorted(sys._current_frames().items(), key=lambda kv: kv[0] == threading.main_thread().ident):
            print(f"thread {by_ident[ident]!r}:")
            print("".join(traceback.format_list(traceback.extract_stack(frame))))
    """))
    text = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=60).stdout
    assert text.index("MainThread") > text.index("in do")  # the workers first
    processes, _ = read_text(text)
    assert len(processes) == 1 and len(processes[0].threads) == 3
    ranks = verdict(tmp_path, text).places
    assert [p.position for p in ranks] == [f"outside any collective, in <module> ({program})"], ranks


def test_a_lone_server_blocked_inside_a_request_is_the_program_not_set_aside(tmp_path, capsys):
    """A paste of one web server process (a uvicorn app: the skill store's shape) whose request handler waits in
    its executor's shutdown for a thread that never ends. Servers are set aside as front ends beside a job's ranks;
    alone, and held on a lock of their own rather than idle in their serving loop, they are the program that
    hangs: "no rank in the input" told the user nothing. A real process (uvicorn's module path, our own stand-in),
    its faulthandler dump."""
    (tmp_path / "uvicorn").mkdir()
    (tmp_path / "uvicorn" / "__init__.py").write_text("")
    (tmp_path / "uvicorn" / "server.py").write_text("class Server:\n    def run(self, app):\n        app()\n")
    (tmp_path / "routes.py").write_text(textwrap.dedent("""
        import time
        from concurrent.futures import ThreadPoolExecutor
        def news_events():
            with ThreadPoolExecutor(max_workers=1) as pool:
                pool.submit(time.sleep, 30)
    """))
    (tmp_path / "serve.py").write_text(textwrap.dedent("""
        import faulthandler, os, threading, time
        import routes
        from uvicorn.server import Server
        def dump():
            time.sleep(0.5)
            with open("dump.tmp", "w") as out:
                faulthandler.dump_traceback(file=out, all_threads=True)
            os.rename("dump.tmp", "paste.txt")
        threading.Thread(target=dump, daemon=True).start()
        Server().run(routes.news_events)
    """))
    proc = subprocess.Popen([sys.executable, "serve.py"], cwd=tmp_path)
    try:
        for _ in range(200):
            if (tmp_path / "paste.txt").exists():
                break
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert "uvicorn/server.py" in (tmp_path / "paste.txt").read_text()
    assert main(["analyze", str(tmp_path / "paste.txt"), "--json"]) in (0, 1), capsys.readouterr().err
    data = json.loads(capsys.readouterr().out)
    assert [r["position"].split(" (")[0] for r in data["ranks"]] == ["executor shutdown <- news_events"], data["ranks"]


def test_a_ci_log_viewers_gutter_before_every_line_is_undone(tmp_path):
    """Buildkite's (and Jenkins') log viewer copies each line behind a "  | " gutter (ray#53341's shape, before Ray's
    own actor prefix): a real faulthandler dump behind both reads as one process with its stack."""
    script = tmp_path / "actor.py"
    script.write_text("import faulthandler, sys\n\ndef wait_for_peer():\n    faulthandler.dump_traceback(sys.stdout)\n"
                      "\nwait_for_peer()\n")
    dump = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60).stdout
    text = "\n".join(f"  | (ThreadedActor pid=61934) {line}" for line in dump.splitlines())
    processes, notes = read_text(text)
    assert len(processes) == 1 and main_frames(processes[0]) == ["wait_for_peer", "<module>"]
    assert "a log viewer's gutter" in notes
