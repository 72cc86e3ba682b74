"""The CLI in-process through main(argv): bad input gives one Error line (and a Hint), never a traceback; JSON and
Chrome export carry the data; `env` prints exports that a shell can eval."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

import tracing
from tests.support import PYTHON, child_env, run_bounded
from tests.tracing import sample_work
from tracing.cli import main
from tracing.identity import RankIdentity
from tracing.tracer import Tracer


def traced_ranks(out, ranks=(0, 1), stream=False, pid_base=900000):
    for rank in ranks:
        identity = RankIdentity(rank=rank, local_rank=rank, world_size=max(ranks) + 1, host="testhost",
                                pid=pid_base + rank)
        config = tracing.TraceConfig(include=("tests.tracing.sample_work",), out=str(out), stream=stream)
        with Tracer(config, identity):
            sample_work.train(rank)
    return out


def error_lines(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


def test_folder_without_traces(tmp_path, capsys):
    assert main(["last", str(tmp_path)]) == 3
    assert error_lines(capsys) == [f"Error: {tmp_path}: no trace files (trace-*.ring or trace-*.txt) in this folder",
                                   "Hint: point it at the --out folder of `tracing run`"]
    assert main(["diverge", str(tmp_path / "missing")]) == 3
    assert error_lines(capsys)[0] == f"Error: {tmp_path / 'missing'}: no such file or folder"


@pytest.mark.parametrize(("content", "message"), [
    (b"", "empty ring file"),
    (b"garbage" * 1000, "not a hangdoctor ring file (bad magic)"),
])
def test_empty_or_corrupt_ring(tmp_path, capsys, content, message):
    bad = tmp_path / "trace-h-0-1.ring"
    bad.write_bytes(content)
    for verb in ("last", "diverge", "show"):
        assert main([verb, str(bad if verb == "show" else tmp_path)]) == 3
        lines = error_lines(capsys)
        assert lines[0].startswith("Error: ") and message in lines[0] and len(lines) <= 2


def test_truncated_ring_and_corrupt_stream(tmp_path, capsys):
    traced_ranks(tmp_path, ranks=(0,))
    (ring,) = tmp_path.glob("*.ring")
    ring.write_bytes(ring.read_bytes()[:5000])
    assert main(["show", str(ring)]) == 3
    assert "truncated ring file: 5000 bytes" in error_lines(capsys)[0]
    stream = tmp_path / "trace-h-0-2.txt"
    stream.write_text("hello\n")
    assert main(["show", str(stream)]) == 3
    assert "not a hangdoctor stream trace" in error_lines(capsys)[0]


def test_one_bad_file_among_good_ones_is_a_warning(tmp_path, capsys):
    traced_ranks(tmp_path)
    (tmp_path / "trace-h-9-9.ring").write_bytes(b"")
    assert main(["last", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["ranks"][1]["rank"] == 1
    assert "Warning: skipped" in captured.err and "empty ring file" in captured.err


def test_traces_of_an_older_run_with_another_world_size_are_left_out(tmp_path, capsys):
    """A folder reused by two runs, 4 ranks then 2: ranks 2-3 exist only in the older run. Merged, they made a job
    of 4 ranks from two runs (sweep round 2); now the newest run's 2, and a warning."""
    traced_ranks(tmp_path, ranks=(0, 1, 2, 3))
    traced_ranks(tmp_path, ranks=(0, 1), pid_base=910000)
    assert main(["last", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    assert [r["rank"] for r in json.loads(captured.out)["ranks"]] == [0, 1]
    assert "Warning: 2 trace(s) of another run left out (world size 4; the newest run has 2 ranks)" in captured.err


def test_bad_input_from_the_real_command_has_no_traceback(tmp_path):
    (tmp_path / "trace-h-0-1.ring").write_bytes(b"x" * 10)
    done = run_bounded([PYTHON, "-m", "tracing", "last", str(tmp_path)], timeout=60, env=child_env())
    assert done.returncode == 3
    assert done.stderr.startswith("Error: ") and "Traceback" not in done.stderr
    done = run_bounded([PYTHON, "-m", "tracing", "run", "--include", "x"], timeout=60, env=child_env())
    assert done.returncode == 2 and done.stderr.startswith("Error: no program to run")
    done = run_bounded([PYTHON, "-m", "tracing", "run", "--include", "x", "--ring", "3", "--", "a.py"], timeout=60,
                       env=child_env())
    assert done.returncode == 2 and "at least 16 events" in done.stderr and "Traceback" not in done.stderr


def test_last_json_and_diverge_json(tmp_path, capsys):
    traced_ranks(tmp_path)
    assert main(["last", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report)[:2] == ["format", "version"] and report["format"] == "tracing-last/1"
    assert [r["condition"] for r in report["ranks"]] == ["stopped", "stopped"]
    assert report["groups"][0]["ranks_text"] == "0-1"
    assert report["groups"][0]["last_events"][-1]["function"]["name"] == "tests.tracing.sample_work:train"
    assert main(["diverge", str(tmp_path), "--json"]) == 1  # the ranks diverged
    diverged = json.loads(capsys.readouterr().out)
    assert diverged["format"] == "tracing-diverge/1"
    first = diverged["divergences"][0]
    branches = {b["ranks_text"]: (b["events"][0]["kind"], b["events"][0]["function"]["qualname"])
                for b in first["branches"]}
    assert branches == {"0": ("ret", "step"), "1": ("call", "odd_one_out")}


def test_diverge_exits_0_when_the_ranks_made_the_same_calls(tmp_path, capsys):
    traced_ranks(tmp_path, ranks=(0, 2))  # sample_work's odd branch is rank 1's
    assert main(["diverge", str(tmp_path)]) == 0
    assert "The compared ranks made the same calls in the same order." in capsys.readouterr().out


def test_version_is_the_distributions(capsys):
    import hangdoctor.clicore as clicore
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"tracing {clicore.__version__}\n"


def test_export_chrome_merges_ranks(tmp_path, capsys):
    traced_ranks(tmp_path / "t", stream=True)
    target = tmp_path / "trace.json"
    assert main(["export", str(tmp_path / "t"), "-o", str(target)]) == 0
    events = json.loads(target.read_text())["traceEvents"]
    assert {e["pid"] for e in events} == {0, 1}
    names = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {"rank 0 (testhost:900000)", "rank 1 (testhost:900001)"}
    for rank in (0, 1):
        phases = [e["ph"] for e in events if e["pid"] == rank and e["ph"] in "BE"]
        assert phases.count("B") == phases.count("E") > 0
    assert any(e.get("name") == "odd_one_out" and e["pid"] == 1 for e in events)
    assert main(["export", str(tmp_path / "t"), "-o", str(target), "--ranks", "7"]) == 3
    assert "none of ranks 7" in capsys.readouterr().err


def test_env_prints_exports_a_shell_can_eval(tmp_path, capsys):
    assert main(["env", "--include", "deepspeed,trainer", "--out", str(tmp_path), "--start-at", "train_step",
                 "--ranks", "0-3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("export PYTHONPATH=") and "tracing/sitedir" in lines[0]
    assert lines[1] == "export HANGDOCTOR_TRACE=" + shlex.quote(
        f"include=deepspeed,trainer;out={tmp_path};ring=65536;start_at=train_step;ranks=0-3")
    assert os.path.isfile(os.path.join(shlex.split(lines[0].split("=", 1)[1].split('"')[0])[0], "sitecustomize.py"))
    assert main(["env", "--out", str(tmp_path)]) == 2
    assert "nothing to trace" in capsys.readouterr().err


def test_without_rich_the_human_view_says_so_and_json_still_works(tmp_path):
    from tests.tracing.helpers import pyenv_python
    python = pyenv_python("3.12.1")
    if run_bounded([python, "-c", "import rich"], timeout=60, env=child_env()).returncode == 0:
        pytest.skip("this Python has rich")
    done = run_bounded([python, "-m", "tracing", "run", "--include", "__main__", "--out", str(tmp_path), "--",
                        str(Path(sample_work.__file__))], timeout=60, env=child_env())
    assert done.returncode == 0, done.output
    human = run_bounded([python, "-m", "tracing", "last", str(tmp_path)], timeout=60, env=child_env())
    assert human.returncode == 4
    assert human.stderr.splitlines() == ["Error: the human-readable view needs the 'rich' package",
                                         "Hint: pip install rich, or use --json"]
    as_json = run_bounded([python, "-m", "tracing", "last", str(tmp_path), "--json"], timeout=60, env=child_env())
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["ranks"][0]["condition"] == "exited"


@pytest.mark.parametrize(("body", "code"), [("sys.exit(3)", 3), ("raise ValueError('boom')", 1), ("pass", 0)])
def test_run_returns_the_programs_exit_code_and_records_it(tmp_path, body, code):
    from tracing.ringreader import read_ring
    script = tmp_path / "prog.py"
    script.write_text(f"import sys\n\ndef main():\n    {body}\n\nmain()\n")
    done = run_bounded([PYTHON, "-m", "tracing", "run", "--include", "__main__", "--out", str(tmp_path / "t"), "--",
                        str(script), "arg"], timeout=60, env=child_env())
    assert done.returncode == code, done.output
    if code == 1:
        assert "ValueError: boom" in done.stderr  # the program's own traceback, as python prints it
    (ring,) = (tmp_path / "t").glob("*.ring")
    trace = read_ring(str(ring))
    assert (trace.state_word, trace.exit_code) == ("exited", code)
    assert trace.identity.argv[-2:] == (str(script), "arg")  # the command line as launched
    assert [e.loc.qualname for e in trace.events][:2] == ["<module>", "main"]
