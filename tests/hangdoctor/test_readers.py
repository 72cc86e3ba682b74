"""Readers: py-spy text (single, concatenated, --native, --locals, errors, the seed's excerpt), py-spy JSON,
collector node files, and the rank identity settled from them."""

import json
from pathlib import Path

import pytest

from hangdoctor.formats.load import InputError, load_paths, node_from_filename
from hangdoctor.formats.pyspy_json import parse_threads
from hangdoctor.formats.pyspy_text import parse_text
from hangdoctor.identity import TopologyFlags
from hangdoctor.model import GONE, OK, PTRACE_DENIED, STOPPED, Frame

DATA = Path(__file__).parent / "data"


def test_text_dump_of_one_process_with_threads_natives_and_locals():
    text = """Process 5456: /usr/bin/python3 sleeper.py --tp 2
Python v3.11.7 (/usr/bin/python3.11)

Thread 5456 (idle): "MainThread"
    clock_nanosleep (libc.so.6)
    0x7f7b3fe4524a (libc.so.6)
    inner (sleeper.py:3)
        Arguments:
            x: 3
        Locals:
            y: (1, 2)
    <module> (sleeper.py:10)
Thread 5458 (active+gil): "busy"
    worker (sleeper.py:8)
"""
    [proc] = parse_text(text)
    assert proc.pid == 5456 and proc.cmdline == "/usr/bin/python3 sleeper.py --tp 2" and proc.status == OK
    main, busy = proc.threads
    assert (main.thread_id, main.name, main.active) == (5456, "MainThread", False)
    assert (busy.name, busy.active, busy.owns_gil) == ("busy", True, True)
    assert main.frames == (
        Frame("clock_nanosleep", "libc.so.6", 0, True), Frame("??", "libc.so.6", 0, True),
        Frame("inner", "sleeper.py", 3), Frame("<module>", "sleeper.py", 10),
    )


def test_concatenated_dumps_split_per_process_and_keep_failures():
    procs = parse_text((DATA / "trace-vm.out").read_text())
    assert [p.pid for p in procs] == [8218, 8219, 8221, 8222, 8223, 8224, 8225, 8226]
    stopped = procs[2]
    assert stopped.status == STOPPED and "Failed to suspend process" in stopped.error and not stopped.threads
    assert procs[0].threads[0].frames[0] == Frame("broadcast", "torch/distributed/distributed_c10d.py", 3151)
    assert procs[4].threads[0].frames[0].name == "all_reduce"


def test_native_dump_has_native_and_python_frames_and_merges_addresses():
    procs = parse_text((DATA / "trace-vm-native.out").read_text())
    frames = procs[0].threads[0].frames
    assert frames[0] == Frame("??", "libc.so.6", 0, True)
    assert Frame("c10d::Work::wait", "libtorch_cpu.so", 0, True) in frames
    assert Frame("broadcast", "torch/distributed/distributed_c10d.py", 3151) in frames
    # same place on two ranks -> the very same interned stack, addresses included
    assert procs[0].threads[0].frames is procs[1].threads[0].frames


def test_seed_excerpt_without_process_headers():
    procs = parse_text((DATA / "seed-excerpt.txt").read_text())
    assert [p.pid for p in procs] == [835990, 835995]
    assert procs[0].threads[0].frames[0] == Frame("train", "megatron/training.py", 915)
    assert procs[1].threads[0].frames[1] == Frame("_aggregate_total_loss", "deepspeed/runtime/pipe/engine.py", 540)


def test_old_py_spy_hex_thread_ids_and_an_error_without_header():
    text = """Thread 0x7F2AB0A5E740 (active)
    train (megatron/training.py:915)
Error: Failed to get process executable name. Check that the process is running.

Caused by:
    0: No such file or directory (os error 2)
Permission Denied: Try running again with elevated permissions by going 'sudo env "PATH=$PATH" !!'
"""
    first, gone, denied = parse_text(text)
    assert first.threads[0].thread_id == 0x7F2AB0A5E740 and first.threads[0].frames[0].line == 915
    assert gone.pid == 0 and gone.status == GONE and "executable name" in gone.error
    assert denied.status == PTRACE_DENIED


def test_pyspy_json_threads():
    data = json.loads((DATA / "rank4.pyspy.json").read_text())
    threads = parse_threads(data)
    main = next(t for t in threads if t.name == "MainThread")
    assert main.frames[0] == Frame("all_reduce", "torch/distributed/distributed_c10d.py", 3252)
    assert main.thread_id == data[0]["pid"], "the main thread's OS id is the pid"
    with pytest.raises(ValueError):
        parse_threads({"not": "a list"})


def test_node_file_identity_from_environment_and_topology_from_argv():
    collection = load_paths([DATA / "gloo8_mixed.node.json"], TopologyFlags())
    assert [r.rank for r in collection.records] == list(range(8))
    assert (collection.dims.tp, collection.dims.pp, collection.dims.dp) == (2, 2, 2)
    assert collection.world_size == 8 and collection.samples == 3
    r5 = collection.records[5].identity
    assert (r5.host, r5.local_rank, r5.rank_source, r5.coords.pp, r5.coords.dp, r5.coords.tp) == ("vm", 5, "RANK", 1, 0, 1)
    assert collection.records[2].samples[0].status == STOPPED and collection.records[2].samples[0].state == "T"
    assert collection.records[7].samples[0].cpu_percent > 5, "the straggler computes"


def test_text_dumps_get_ranks_from_node_order_and_local_rank_and_say_so():
    collection = load_paths([DATA / "seed-style"], TopologyFlags(world_size=320))
    ids = {r.rank: r.identity for r in collection.records}
    assert sorted(ids) == list(range(16))
    assert ids[6].host == "jean-zay-iam01" and ids[6].local_rank == 6 and ids[6].rank_source == "node order + local rank"
    assert ids[15].host == "jean-zay-iam02" and ids[15].pid == 0, "the failed dump fills the missing local rank 7"
    assert (collection.dims.tp, collection.dims.pp, collection.dims.dp) == (8, 10, 4)
    assert any("ranks assumed from node order" in w for w in collection.warnings)


def test_flags_override_argv_and_bad_topology_is_a_warning():
    collection = load_paths([DATA / "gloo8_mixed.node.json"], TopologyFlags(tp=1, pp=4))
    assert (collection.dims.tp, collection.dims.pp, collection.dims.dp) == (1, 4, 2)
    collection = load_paths([DATA / "gloo8_mixed.node.json"], TopologyFlags(tp=3))
    assert collection.dims is None and any("not divisible" in w for w in collection.warnings)


def test_node_name_from_file_name():
    assert node_from_filename(Path("trace-jean-zay-iam01.out")) == "jean-zay-iam01"
    assert node_from_filename(Path("n3.json")) == "n3"


def test_unreadable_inputs_raise_input_errors_that_name_the_file(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    with pytest.raises(InputError, match="notes.txt"):
        load_paths([bad], TopologyFlags())
    broken = tmp_path / "x.json"
    broken.write_text("{ nope")
    with pytest.raises(InputError, match="not valid JSON"):
        load_paths([broken], TopologyFlags())
    with pytest.raises(InputError, match="no such file"):
        load_paths([tmp_path / "missing"], TopologyFlags())


def test_node_files_with_py_spys_json_unfactored_read_the_same(tmp_path):
    from hangdoctor.analysis.verdict import diagnose
    from hangdoctor.collector import compact

    doc = json.loads((DATA / "gloo8_mixed.node.json").read_text())
    for proc in doc["processes"]:
        for sample in proc["samples"]:
            sample["pyspy_json"] = compact.expand(doc, sample)
            del sample["pyspy_threads"]
    del doc["frame_table"]
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(doc))
    factored = diagnose(load_paths([DATA / "gloo8_mixed.node.json"], TopologyFlags()))
    unfactored = diagnose(load_paths([plain], TopologyFlags()))
    assert [(p.ranks, p.position, p.progress) for p in unfactored.places] == \
        [(p.ranks, p.position, p.progress) for p in factored.places]


def test_py_spys_error_for_one_process_takes_the_pid_its_file_is_named_with(tmp_path):
    # one file per process (host-PID.json, as a loop of `py-spy dump --json --pid $p > host-$p.json` writes them):
    # the stopped process's file holds only py-spy's error, which names no pid; it keeps its place among the others
    from hangdoctor.formats.load import load_paths
    from hangdoctor.identity import TopologyFlags

    good = ('[{"pid": %d, "thread_id": 1, "thread_name": "MainThread", "os_thread_id": %d, "active": false, '
            '"owns_gil": false, "frames": [{"name": "main", "filename": "train.py", "line": 3}]}]')
    for pid in (101, 103):
        (tmp_path / f"n1-{pid}.json").write_text(good % (pid, pid))
    (tmp_path / "n1-102.json").write_text("Error: Failed to get stack traces\n\nCaused by:\n    0: Failed to suspend "
                                          "process\n")
    c = load_paths([tmp_path], TopologyFlags())
    assert [(r.identity.rank, r.identity.pid, r.identity.host) for r in c.records] == [(0, 101, "n1"), (1, 102, "n1"),
                                                                                       (2, 103, "n1")]


def test_a_native_dump_whose_thread_ends_in_unnamed_libc_frames_below_its_start_is_whole():
    # py-spy --native: a forked pool worker's only thread (tid = pid) ends with Thread._bootstrap, then libc's clone
    # as bare addresses; it reached its start, so the dump is not cut off
    from hangdoctor.formats.pyspy_text import parse_text

    text = ("Process 14152: python -u train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
            'Thread 14152 (idle): "Thread-2 (_handle_workers)"\n'
            "    0x7f25c00a3f16 (libc.so.6)\n    SimpleQueue.get (multiprocessing/queues.py:364)\n"
            "    worker (multiprocessing/pool.py:114)\n    Thread._bootstrap_inner (threading.py:1045)\n"
            "    Thread._bootstrap (threading.py:1002)\n    thread_run (libpython3.11.so.1.0)\n"
            "    0x7f25c00a71f5 (libc.so.6)\n    0x7f25c01278ec (libc.so.6)\n")
    [proc] = parse_text(text)
    assert not proc.truncated
    [cut] = parse_text(text.split("    Thread._bootstrap_inner")[0])
    assert cut.truncated
