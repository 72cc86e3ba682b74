"""The per-node task of a step, run directly (no SLURM needed): one framed line, whatever the command does."""

from slurm.steps import STEPWRAP
from slurm.frames import decode
from slurm.stepwrap import parse_args
from tests.support import PYTHON, child_env, run_bounded


def wrapped(*command: str, timeout: float = 5, **env: str) -> dict:
    """As run_step_on_each_node starts it on a node: by path, without site-packages."""
    result = run_bounded([PYTHON, "-S", STEPWRAP, f"--timeout={timeout}", "--", *command], timeout=30,
                         env=child_env(**env))
    assert result.returncode == 0, result.output
    records, incomplete = decode(result.stdout.splitlines())
    assert len(records) == 1 and not incomplete
    return records[0][1]


def test_ok_and_failed_commands_keep_output_and_status():
    ok = wrapped("sh", "-c", "echo out; echo err >&2", SLURMD_NODENAME="n7")
    assert (ok["node"], ok["status"], ok["returncode"], ok["stdout"], ok["stderr"]) == ("n7", "ok", 0, "out\n", "err\n")
    failed = wrapped("sh", "-c", "echo half; exit 3")
    assert (failed["status"], failed["returncode"], failed["stdout"]) == ("failed", 3, "half\n")


def command_line(pid: str) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode().strip()
    except OSError:  # gone
        return ""


def test_a_hanging_command_is_killed_at_its_bound_with_its_partial_output():
    # $$: the shell's pid, handed on to the sleep by exec; the wrapper returns only once it has reaped it
    record = wrapped("sh", "-c", "echo started $$; exec sleep 60", timeout=1)
    assert (record["status"], record["returncode"]) == ("timeout", None)
    started, pid = record["stdout"].split()
    assert (started, record["stdout"]) == ("started", f"started {pid}\n")  # its partial output, kept whole
    assert command_line(pid) != "sleep 60", "the command that overran its bound was killed"
    assert record["seconds"] >= 1  # it had its whole bound before it was killed


def test_a_missing_program_is_not_started():
    record = wrapped("/nonexistent/py-spy", "dump")
    assert record["status"] == "not started" and "No such file" in record["stderr"]


def test_large_output_comes_back_whole_in_short_lines():
    result = run_bounded([PYTHON, "-m", "slurm.stepwrap", "--timeout=10", "--", PYTHON, "-c",
                          "import random; random.seed(1); print(''.join(random.choice('ab c') for _ in range(300000)))"],
                         timeout=30)
    lines = result.stdout.splitlines()
    assert len(lines) > 10 and max(map(len, lines)) < 1000
    ((_, rec),) = decode(lines)[0]
    assert len(rec["stdout"]) == 300001


def test_no_command_is_a_usage_error():
    result = run_bounded([PYTHON, "-m", "slurm.stepwrap", "--timeout=1", "--"], timeout=30)
    assert result.returncode == 2 and "no command given" in result.stderr


def test_arguments_read_directly_or_by_argparse_agree():
    assert parse_args(["--timeout=2.5", "--", "py-spy", "dump", "--timeout=9"]) == (2.5, ["py-spy", "dump", "--timeout=9"])
    assert parse_args(["--timeout", "2.5", "--", "true"]) == (2.5, ["true"])  # the other spelling: argparse


def test_the_module_form_still_runs():
    result = run_bounded([PYTHON, "-m", "slurm.stepwrap", "--timeout=5", "--", "true"], timeout=30)
    records, _ = decode(result.stdout.splitlines())
    assert [r["status"] for _, r in records] == ["ok"]
