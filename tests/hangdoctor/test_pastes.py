"""What people paste: py-spy's text after logs, launchers and editors went through it. Every form below is
made from one of our own recorded dumps (tests/hangdoctor/corpus/ddp_barrier: 4 ranks under torchrun, rank 0
in a barrier, ranks 1-3 in DDP's backward), so each must give the same ranks in the same places."""

import re
from pathlib import Path

import pytest

from hangdoctor.analysis.verdict import diagnose
from hangdoctor.formats.load import load_paths
from hangdoctor.formats.paste import ranks_from_names
from hangdoctor.formats.text import read_text
from hangdoctor.formats.pyspy_text import parse_text
from hangdoctor.identity import TopologyFlags
from tests.hangdoctor.corpus.check import CORPUS

TEXT = (CORPUS / "ddp_barrier" / "text" / "s1" / "trace-node1.out").read_text()
LOCALS = (CORPUS / "ddp_barrier" / "locals" / "trace-node1.out").read_text()


def blocks(text: str) -> list[list[str]]:
    """The dump cut at each `Process` line."""
    out: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("Process "):
            out.append([])
        out[-1].append(line)
    return out


def verdict_of(tmp_path: Path, text: str, name: str = "trace-node1.out"):
    path = tmp_path / name
    path.write_text(text)
    return diagnose(load_paths([path], TopologyFlags()))


def places(verdict) -> list[tuple[str, str]]:
    return sorted((",".join(map(str, p.ranks)), p.activity) for p in verdict.places)


EXPECTED = [("0", "barrier"), ("1,2,3", "ddp-reducer")]


def test_the_dump_as_printed(tmp_path):
    v = verdict_of(tmp_path, TEXT)
    assert places(v) == EXPECTED and [a.role for a in v.set_aside] == ["launcher"]


def test_frames_without_any_header(tmp_path):
    # each process's main-thread frames only, blank lines between: what people copy out of a long dump
    parts = []
    for block in blocks(TEXT):
        main = []
        for line in block:
            if line.startswith("Thread "):
                if main:
                    break
                main.append(line)
            elif main and line.startswith("    "):
                main.append(line.strip())
        parts.append("\n".join(main[1:]))
    v = verdict_of(tmp_path, "\n\n".join(parts) + "\n")
    assert places(v) == EXPECTED


def test_indented_headers_and_deeper_frames(tmp_path):
    text = "\n".join(("    " + line if line.startswith("Thread ") else "    " + line if line.startswith(" ") else line)
                     for line in LOCALS.splitlines())
    v = verdict_of(tmp_path, text)
    assert places(v) == EXPECTED
    assert not any("cut off" in w for w in v.warnings), "locals are not frames, even indented deeper"


@pytest.mark.parametrize("prefix", ["[rank{r}]: ", "{r}: ", "2024-05-01 12:00:0{r},123 INFO ", "node1: ", "trainer-1  | "])
def test_log_prefixes(tmp_path, prefix):
    lines = []
    for index, block in enumerate(blocks(TEXT)):
        if index == 0 and prefix == "{r}: ":
            continue  # srun --label: one process per task (the launcher is srun itself, no Python)
        rank = max(index - 1, 0)  # the launcher's lines under rank 0's prefix, as a combined log would
        lines += [prefix.format(r=rank) + line for line in block]
    v = verdict_of(tmp_path, "\n".join(lines) + "\n")
    assert places(v) == EXPECTED


GDB_BARRIER = ["#0  0x00007f3a1c2b4de in pmi_barrier_wait", "#1  0x00007f3a1c2b25ee in pmi_fence at fence.c:575",
               "#2  0x00000000004017a2 in main"]


def test_a_debuggers_grouped_ranks_share_one_stack_and_bare_gdb_frames_are_frames():
    """STAT's and ATP's form: `host{ranks}: ` before each line of a stack that those ranks share; gdb frames with
    no argument list and no thread header (our own text, after the shape of ofi-cray/libfabric-cray#909)."""
    text = "Current location:\n" + "\n".join([f"gpu7{{0..1,3}}: {f}" for f in GDB_BARRIER] +
                                            [f"gpu7{{2}}: {f}" for f in GDB_BARRIER[1:]]) + "\n"
    processes, notes = read_text(text)
    assert sorted(p.rank for p in processes) == [0, 1, 2, 3] and {p.host for p in processes} == {"gpu7"}
    stacks = {p.rank: [f.name for f in p.threads[0].frames] for p in processes}
    assert stacks[3] == ["pmi_barrier_wait", "pmi_fence", "main"] and stacks[2] == ["pmi_fence", "main"]  # innermost first
    assert read_text("\n".join(GDB_BARRIER[:1]) + "\nnot a frame #1 something\n")[0] == [], "one frame is no backtrace"


def test_gdbs_info_threads_table_is_threads_with_their_top_frames():
    text = ("(gdb) info threads\n  Id   Target Id         Frame\n"
            '* 1    Thread 0x7fc73ac5d700 (LWP 52422) "python" select_poll_poll () at selectmodule.c.h:219\n'
            '  2    Thread 0x7fc6b59e6700 (LWP 52574) "" 0x00007fc739c909c8 in accept4 (fd=7) at accept4.c:40\n')
    [process] = read_text(text)[0]
    assert [(t.name, [f.name for f in t.frames]) for t in process.threads] == [
        ("MainThread", ["select_poll_poll"]), ("", ["accept4"])]


def test_a_banner_drawn_with_tildes_is_a_thread_header_not_a_fence():
    """pytest-timeout's thread dump (our own text, after the shape in pytorch/pytorch#193951)."""
    frame = '  File "/w/{0}.py", line {1}, in {0}\n    {0}()\n'
    text = ("~~~~~~~~~~ Stack of Thread-3 (run) (1399244) ~~~~~~~~~~\n" + frame.format("_bootstrap", 1) +
            frame.format("run", 2) + "~~~~~~~~~~ Stack of MainThread (1399268) ~~~~~~~~~~\n" +
            frame.format("<module>", 3) + frame.format("main", 4) + frame.format("join", 5))
    [process] = read_text(text)[0]
    assert [(t.name, [f.name for f in t.frames]) for t in process.threads] == [
        ("thread 1399244", ["run", "_bootstrap"]), ("MainThread", ["join", "main", "<module>"])]


def test_gdbs_note_after_a_cut_backtrace_does_not_end_the_process():
    text = "".join(f"Thread {n} (Thread 0x7f00{n} (LWP 10{n})):\n#0  0x00007f in poll () from libc.so\n"
                   f"#1  0x00007f in wait_{n} () from libx.so\n(More stack frames follow...)\n\n" for n in (3, 2, 1))
    [process] = read_text(text)[0]
    assert [t.name for t in process.threads] == ["", "", "MainThread"]


@pytest.mark.parametrize("names, ranks", [
    (["sglang::scheduler_TP3"], [3]),
    (["sglang::scheduler_DP1_TP3", "sglang::scheduler_DP0_TP1"], [3, 1]),  # DP attention: TP ranks span the DPs
    (["sglang::scheduler_DP1_TP0", "sglang::scheduler_DP0_TP0"], [None, None]),  # each DP its own TP ranks
    (["Worker_PP1_TP0"], [None]),  # a later pipeline stage: its TP index repeats the first stage's
    (["sglang::scheduler_TP1_EP1_PP0", "python train.py"], [1, None]),
])
def test_a_process_name_gives_its_rank_by_its_tensor_parallel_index(names, ranks):
    assert ranks_from_names(names) == ranks
    text = "".join(f"Process {100 + i}: {name}\nPython v3.11.9 (/usr/bin/python3.11)\n\n"
                   f'Thread {100 + i} (idle): "MainThread"\n    recv (sock.py:1{i})\n\n' for i, name in enumerate(names))
    assert [p.rank for p in read_text(text)[0]] == ranks


def test_interleaved_ranks_are_split_back_by_their_prefix(tmp_path):
    per_rank = {index - 1: block for index, block in enumerate(blocks(TEXT)) if index}
    lines, cursors = [], {r: 0 for r in per_rank}
    while any(cursors[r] < len(per_rank[r]) for r in per_rank):  # round robin, one line each
        for r, block in per_rank.items():
            if cursors[r] < len(block):
                lines.append(f"[rank{r}]: {block[cursors[r]]}")
                cursors[r] += 1
    v = verdict_of(tmp_path, "\n".join(lines) + "\n")
    assert places(v) == EXPECTED
    assert {r.rank: r.identity.rank_source for r in v.views.values()} == {0: "prefix", 1: "prefix", 2: "prefix", 3: "prefix"}


def test_a_paste_that_starts_inside_another_dump(tmp_path):
    # the top of the paste is the end of a process we do not have: its frames belong to no rank
    head = "\n".join(blocks(TEXT)[1][-5:])
    v = verdict_of(tmp_path, head + "\n" + TEXT)
    assert places(v) == EXPECTED
    assert any("before the first header" in w for w in v.warnings)


def test_a_dump_cut_off_at_the_end_is_partial(tmp_path):
    lines = TEXT.splitlines()
    last_rank = max(i for i, line in enumerate(lines) if line.startswith("Process "))
    cut = "\n".join(lines[:last_rank + 6]) + "\n    Tensor.backw"  # half a frame
    v = verdict_of(tmp_path, cut)
    assert v.partial and "partial" in v.headline
    [proc] = [p for p in parse_text(cut) if p.truncated]
    assert proc.pid == int(re.search(r"Process (\d+)", lines[last_rank])[1])


def test_the_same_processes_dumped_twice_in_one_file_are_two_samples(tmp_path):
    v = verdict_of(tmp_path, TEXT + TEXT)
    assert sorted(v.views) == [0, 1, 2, 3] and v.samples == 2 and v.hung is True
