"""The shared command-line core, without a subprocess: every outcome of a verb becomes an exit code and
`Error:`/`Hint:` lines in one place, for hangdoctor, weightdiff and tracing alike (clicore/app.py)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

import hangdoctor.clicore as clicore
from hangdoctor.clicore.app import Tool, main
from hangdoctor.clicore.errors import EXIT_INTERRUPTED, EXIT_USAGE, CommandError
from tests.support import PYTHON, child_env, run_bounded


def toy_tool(behaviour) -> tuple[Tool, list[str]]:
    """A tool with one verb, `go`, whose run() does `behaviour`; its module is built here, not imported."""
    module = types.ModuleType("toy_verb", "Do one thing.\n\nLonger help.")
    module.EXIT_CODES = {0: "done", 1: "half done", 2: "bad command line"}
    module.prepare_parser = lambda parser: parser.add_argument("--count", type=int, default=1)
    module.run = behaviour
    sys.modules["toy_verb"] = module
    lines: list[str] = []
    return Tool(name="toy", description="A toy.", verbs={"go": ("toy_verb", "Do one thing.")}), lines


def run_toy(behaviour, argv):
    tool, lines = toy_tool(behaviour)
    code = main(tool, argv, call=lambda module, args: module.run(args), report=lines.append)
    return code, lines


def test_a_command_error_is_its_lines_and_its_code():
    def fail(args):
        raise CommandError("job 7 is not running", exit_code=3, hint="check it with squeue")
    assert run_toy(fail, ["go"]) == (3, ["Error: job 7 is not running", "Hint: check it with squeue"])


def test_the_verbs_return_value_is_the_exit_code_and_none_is_success():
    assert run_toy(lambda args: args.count, ["go", "--count", "1"]) == (1, [])
    assert run_toy(lambda args: None, ["go"]) == (0, [])


def test_a_usage_error_is_one_error_line_and_code_2(capsys):
    code, lines = run_toy(lambda args: 0, ["go", "--count", "many"])
    assert code == EXIT_USAGE
    assert lines == ["Error: argument --count: invalid int value: 'many'", "Hint: see `toy go --help`"]
    assert capsys.readouterr().err == ""  # nothing from argparse itself: no usage block
    code, lines = run_toy(lambda args: 0, ["jump"])
    assert code == EXIT_USAGE and lines[0].startswith("Error: argument VERB: invalid choice: 'jump'")


def test_ctrl_c():
    def interrupted(args):
        raise KeyboardInterrupt
    assert run_toy(interrupted, ["go"]) == (EXIT_INTERRUPTED, ["Error: interrupted"])


def test_a_reader_that_goes_away_is_success_without_a_traceback():
    """`tracing last DIR | head -1`: the verb's prints hit a closed pipe; exit 0 and nothing on stderr."""
    code = ("import sys, types\nfrom hangdoctor.clicore.app import Tool, main\n"
            "m = types.ModuleType('v', 'Print.'); m.prepare_parser = lambda p: None\n"
            "m.run = lambda args: [print('line', i, flush=True) for i in range(10**6)] and 0\n"
            "sys.modules['v'] = m\n"
            "sys.exit(main(Tool('toy', 'A toy.', {'go': ('v', 'Print.')}), ['go'], call=lambda mod, a: mod.run(a)))")
    child = subprocess.Popen([PYTHON, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env())
    assert child.stdout.readline() == b"line 0\n"
    child.stdout.close()
    try:
        err = child.stderr.read()
        assert child.wait(timeout=60) == 0 and err == b""
    finally:
        child.kill()


def test_no_verb_prints_the_help_and_is_a_usage_error(capsys):
    assert run_toy(lambda args: 0, []) == (EXIT_USAGE, [])
    assert "go" in capsys.readouterr().err


def test_a_verbs_help_lists_its_exit_codes(capsys):
    assert run_toy(lambda args: 0, ["go", "--help"])[0] == 0
    out = capsys.readouterr().out
    assert "Longer help." in out
    assert "exit codes:\n  0   done\n  1   half done\n  2   bad command line\n" in out


def test_a_command_error_must_say_its_exit_code():
    with pytest.raises(TypeError):
        CommandError("no code")  # type: ignore[call-arg]


TOOLS = ("hangdoctor", "weightdiff", "tracing")


@pytest.mark.parametrize("name", TOOLS)
def test_every_tool_answers_version(name, capsys):
    cli = importlib.import_module(f"{name}.cli")
    argv_main = cli.main
    assert argv_main(["--version"]) == 0
    assert capsys.readouterr().out == f"{name} {clicore.__version__}\n"


@pytest.mark.parametrize("name", TOOLS)
def test_verb_summaries_are_the_first_lines_of_their_docstrings(name):
    tool = importlib.import_module(f"{name}.cli").TOOL
    for verb, (module_name, summary) in tool.verbs.items():
        assert importlib.import_module(module_name).__doc__.strip().splitlines()[0] == summary, verb


@pytest.mark.parametrize("name", TOOLS)
def test_every_verbs_help_has_its_exit_codes(name, capsys):
    cli = importlib.import_module(f"{name}.cli")
    for verb in cli.TOOL.verbs:
        assert cli.main([verb, "--help"]) == 0
        out = capsys.readouterr().out
        assert "exit codes:\n  0   " in out and "\n  2   " in out, (name, verb)


@pytest.mark.parametrize("name", TOOLS)
def test_help_imports_no_verb_and_no_torch(name):
    """`TOOL --help` loads none of its verb modules (nor torch, nor rich for tracing): it starts at once."""
    code = (f"import sys\nfrom {name}.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('LOADED', ' '.join(sorted(m for m in sys.modules if '.commands.' in m or m in ('torch', 'rich'))))")
    out = run_bounded([PYTHON, "-c", code], timeout=60, env=child_env()).stdout
    loaded = out.split("LOADED", 1)[1].split()
    assert [m for m in loaded if ".commands." in m or m == "torch"] == [], loaded
    if name == "tracing":
        assert "rich" not in loaded
