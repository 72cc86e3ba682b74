"""Tee: every complete line is in the file the moment it is written; the original stream still gets everything."""

from __future__ import annotations

import io
import sys

from tracing.identity import RankIdentity
from tracing.tee import Tee, tee_std_streams


def test_complete_lines_reach_the_file_at_once(tmp_path):
    original = io.StringIO()
    path = tmp_path / "trace-host-0-1.txt"
    tee = Tee(str(path), original)
    tee.write("first line\n")
    assert path.read_text() == "first line\n"  # read by another handle, while the Tee is open
    tee.write("second ")  # no end of line yet: it may wait in the buffer
    tee.write("half\n")
    assert path.read_text() == "first line\nsecond half\n"
    print("via print", file=tee)
    assert path.read_text().endswith("via print\n")
    assert original.getvalue() == "first line\nsecond half\nvia print\n"
    assert tee.getvalue() == original.getvalue()  # anything else comes from the original stream
    tee.close()
    tee.write("after close\n")  # the copy is closed, the original stream still works
    assert original.getvalue().endswith("after close\n")


def test_tee_std_streams_names_the_file_per_rank(tmp_path, monkeypatch):
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    identity = RankIdentity(rank=5, local_rank=1, world_size=8, host="node3", pid=77)
    path = tee_std_streams(str(tmp_path), identity)
    print("to stdout")
    print("to stderr", file=sys.stderr)
    assert path == str(tmp_path / "stdout-node3-1-77.txt")
    assert open(path).read() == "to stdout\nto stderr\n"
    assert out.getvalue() == "to stdout\n" and err.getvalue() == "to stderr\n"
