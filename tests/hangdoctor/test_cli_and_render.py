"""The CLI without a subprocess (main(argv) -> int) and the renderers into a StringIO console."""

import io
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from rich.console import Console

from hangdoctor.clicore.errors import EXIT_ENVIRONMENT, EXIT_NOT_FOUND, EXIT_PARTIAL, EXIT_USAGE
from hangdoctor.analysis.verdict import diagnose
from hangdoctor.cli import main
from hangdoctor.formats.load import load_paths
from hangdoctor.identity import TopologyFlags
from hangdoctor.model import Collection, Frame, RankIdentity, RankRecord, Sample, ThreadStack
from hangdoctor.render.html import render_html, render_svg
from hangdoctor.render.jsonout import verdict_to_dict
from hangdoctor.render.terminal import render_verdict

DATA = Path(__file__).parent / "data"


def consoles():
    out, err = io.StringIO(), io.StringIO()
    return out, err, Console(file=out, width=100), Console(file=err, width=200)


def run(*argv):
    out, err, out_console, err_console = consoles()
    code = main(list(argv), out=out_console, err=err_console)
    return code, out.getvalue(), err.getvalue()


def test_analyze_prints_the_verdict_tree_and_classes():
    code, out, err = run("analyze", str(DATA / "trainer_pp2dp2_skip_loss_broadcast.node.json"))
    assert code == 0, err
    assert "HUNG: 4 ranks stuck, 4 in 2 calls (4/4 responded)" in out
    assert "pp=0 (all dp)" in out and "wait in broadcast <-" in out
    assert "merged stacks of 4 ranks" in out and "class 2 · 2 ranks 2-3 · stuck" in out
    assert "never entered" in out


def test_analyze_json_is_the_same_data_as_the_report():
    code, out, _ = run("analyze", "--json", str(DATA / "gloo8_mixed.node.json"))
    assert code == EXIT_PARTIAL, "rank 2 did not respond"
    data = json.loads(out)
    assert data["format"] == "hangdoctor-verdict/1" and data["version"]
    verdict = diagnose(load_paths([DATA / "gloo8_mixed.node.json"], TopologyFlags()))
    assert data == json.loads(json.dumps(verdict_to_dict(verdict)))
    assert data["headline"] == verdict.headline and data["hung"] is True
    assert data["unresponsive"] == {"stopped": {"count": 1, "folded": "2", "ranks": [2]}}
    assert [p["folded"] for p in data["places"]] == ["0-1,3", "4-6", "7"]
    assert data["places"][0]["wait"]["caller"]["name"] == "_aggregate_total_loss"
    assert data["topology"] == {"tp": 2, "pp": 2, "dp": 2, "order": "tp-dp-pp", "source": "argv of pid 8218 on vm"}
    rank7 = data["ranks"][7]
    assert (rank7["progress"], rank7["coords"], rank7["host"]) == ("progressing", {"dp": 1, "pp": 1, "tp": 1}, "vm")
    root, module = data["tree"][:2]
    assert root["count"] == 8 and root["parent"] is None
    assert module["frame"]["name"] == "<module>" and module["parent"] == 0 and module["ranks"] == "0-7"
    assert [n["ends"] for n in data["tree"] if n["ends"]] == ["0-1,3", "2", "4-6", "7"]


def test_analyze_writes_html_and_svg(tmp_path):
    html, svg = tmp_path / "r.html", tmp_path / "t.svg"
    code, _, err = run("analyze", str(DATA / "gloo8_mixed.node.json"), "--html", str(html), "--svg", str(svg))
    assert code == EXIT_PARTIAL and f"Wrote {html}" in err
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "never entered" in page
    assert not re.search(r'(src|href)="(https?:)?//', page), "self-contained: no external resources"
    picture = svg.read_text()
    assert picture.startswith("<svg") and "[3] 0-1,3" in picture and "slow_forward (hung_gloo.py:69) ×401" in picture


def test_all_threads_adds_each_thread_to_the_tree_and_changes_nothing_else(tmp_path):
    dump = str(DATA / "gloo8_mixed.node.json")  # real dumps: every rank has its MainThread and a watchdog thread
    _, main_only, _ = run("analyze", "--json", dump)
    code, every, _ = run("analyze", "--json", "--all-threads", dump, "--svg", str(tmp_path / "t.svg"))
    main_only, every = json.loads(main_only), json.loads(every)
    assert code == EXIT_PARTIAL and (main_only["threads"], every["threads"]) == ("main", "all")
    for key in ("headline", "places", "classes", "suspects", "hints", "ranks", "responded", "unresponsive"):
        assert every[key] == main_only[key], key
    tree = every["tree"]
    assert tree[0]["count"] == 8, "a rank counts once, however many threads it has"
    threads = {n["frame"]["name"]: n for n in tree if n["parent"] == 0}
    assert {name: n["ranks"] for name, n in threads.items()} == {"thread MainThread": "0-7", "thread watchdog": "0-7"}
    assert threads["thread watchdog"]["frame"] == {"name": "thread watchdog", "file": "", "line": 0, "native": False}
    # classes end in the main threads only: the same leaves as without --all-threads
    assert [n["ends"] for n in tree if n["ends"]] == [n["ends"] for n in main_only["tree"] if n["ends"]]
    watchdog_leaf = [n for n in tree if n["frame"] and n["frame"]["name"] == "watchdog"]
    assert len(watchdog_leaf) == 1 and watchdog_leaf[0]["ranks"] == "0-7" and watchdog_leaf[0]["ends"] == ""
    assert not any(n["frame"] and n["frame"]["name"].startswith("thread ") for n in main_only["tree"])
    _, text, _ = run("analyze", "--all-threads", dump)
    assert "merged stacks of 8 ranks, every thread" in text and "│   thread MainThread\n" in text
    assert "    thread watchdog\n" in text and "thread watchdog (" not in text  # a marker, not a code location
    assert "thread watchdog" in (tmp_path / "t.svg").read_text()


def test_bad_inputs_are_one_line_errors_with_exit_codes(tmp_path):
    code, out, err = run("analyze", str(tmp_path / "missing"))
    assert code == EXIT_NOT_FOUND and err.startswith("Error: ") and "Traceback" not in err
    (tmp_path / "x.txt").write_text("nothing here\n")
    code, _, err = run("analyze", str(tmp_path / "x.txt"))
    assert code == EXIT_NOT_FOUND and "no stack frame in it" in err and "Hint:" in err
    code, _, err = run("analyze", str(DATA / "gloo8_mixed.node.json"), "--order", "tp-tp-pp")
    assert code == EXIT_USAGE and "must name each of tp, dp, pp" in err


def test_usage_errors_exit_2_with_one_line(capsys):
    assert main(["attach"]) == EXIT_USAGE  # argparse's own error: main still returns the code
    assert "Error: one of the arguments --jobid --local --pid --hostfile --ray is required" in capsys.readouterr().err
    code, _, err = run("attach", "--local", "--samples", "5", "--interval", "20", "--timeout", "10")
    assert code == EXIT_USAGE and "raise --timeout" in err
    code, _, err = run("attach", "--pid", "1", "--run-id", "x")
    assert code == EXIT_USAGE and "--run-id goes with --local" in err


def help_exit_codes(capsys, *argv: str) -> dict[int, str]:
    """The exit codes a --help text lists, {code: meaning}."""
    assert main([*argv, "--help"]) == 0
    text = capsys.readouterr().out
    codes, current = {}, None
    for line in text.split("exit codes:\n", 1)[1].splitlines():
        match = re.match(r"^  (\d+) +(.*)$", line)
        if match:
            current = int(match.group(1))
            codes[current] = match.group(2)
        elif current is not None and line.startswith("      "):
            codes[current] += " " + line.strip()
    return codes


def test_each_verb_documents_its_own_exit_codes(capsys):
    attach = help_exit_codes(capsys, "attach")
    assert sorted(attach) == [0, 1, 2, 3, 4, 130]
    assert attach[4].startswith("cannot collect: py-spy (and pystack) missing") and "srun" in attach[4]
    analyze = help_exit_codes(capsys, "analyze")
    assert sorted(analyze) == [0, 1, 2, 3, 130] and "dumps" in analyze[1]
    plan = help_exit_codes(capsys, "plan")
    assert sorted(plan) == [0, 1, 2, 130] and "topology" in plan[0] and "no topology is valid" in plan[1]
    experiment = help_exit_codes(capsys, "experiment")
    assert sorted(experiment) == [0, 1, 2, 3, 4, 130] and "hung" in experiment[1] and "sbatch" in experiment[4]
    for verb, codes in {"analyze": analyze, "plan": plan, "experiment": experiment}.items():
        text = " ".join(codes.values())
        assert "py-spy" not in text and "ptrace" not in text, f"{verb}'s exit codes describe attach: {codes}"
    for verb in ("plan", "experiment"):
        assert "rank" not in " ".join(help_exit_codes(capsys, verb).values())
    assert main(["--help"]) == 0
    assert "each verb lists its own in `hangdoctor VERB --help`" in capsys.readouterr().out


def test_attach_starts_without_importing_other_verbs_or_the_analysis():
    """Only the verb run is imported, and attach imports its analysis and renderers while py-spy runs, not before."""
    from tests.support import PYTHON, child_env, run_bounded

    code = ("import sys; from hangdoctor.cli import build_parser; build_parser('attach')\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith(('hangdoctor', 'hangdoctor.experiments', 'hangdoctor.throughput', "
            "'slurm', 'rich.progress', 'rich.table', 'pandas')))))")
    loaded = run_bounded([PYTHON, "-c", code], timeout=60, env=child_env()).stdout.split()
    assert "hangdoctor.commands.attach" in loaded
    early = [m for m in loaded if m.startswith(("hangdoctor.analysis", "hangdoctor.render", "hangdoctor.experiments",
                                                "hangdoctor.throughput", "rich.progress", "rich.table", "pandas"))]
    assert early == [], early


def test_every_code_a_verb_returns_is_in_its_help(capsys, tmp_path):
    """Real outcomes of each verb (no subprocess): the code returned is one its --help explains."""
    log = tmp_path / "empty.log"
    log.write_text("")
    node = str(DATA / "trainer_pp2dp2_skip_loss_broadcast.node.json")
    plan = ["plan", "--gpus", "8", "--gpus-per-node", "8", "--layers", "4", "--hidden", "64", "--heads", "4",
            "--vocab", "1024", "--seq-length", "128", "--global-batch-size", "16"]
    cases = {
        "analyze": [([node], 0), ([str(DATA / "gloo8_mixed.node.json")], 1), ([node, "--order", "x"], 2),
                    ([str(tmp_path / "none")], 3)],
        "attach": [(["--pid", "4000000", "--out", str(tmp_path / "o")], 3), (["--local", "--samples", "0"], 2),
                   (["--pid", "1", "--py-spy", str(tmp_path / "no-py-spy")], 4)],
        "plan": [(plan[1:], 0), ([*plan[1:], "--gpu-memory", "0.000001"], 1), (["--gpus", "0"], 2)],
        "experiment": [(["--logs", str(log)], 3), (["--toggle", "X"], 2)],
    }
    for verb, runs in cases.items():
        documented = help_exit_codes(capsys, verb)
        for argv, expected in runs:
            code, _, err = run(verb, *argv)
            capsys.readouterr()
            assert code == expected and code in documented, (verb, argv, code, err)


def test_missing_py_spy_and_missing_processes(tmp_path):
    code, _, err = run("attach", "--pid", "4000000", "--py-spy", str(tmp_path / "no-py-spy"))
    assert code == EXIT_ENVIRONMENT and "py-spy not found" in err and "pip install py-spy" in err
    code, _, err = run("attach", "--pid", "4000000", "--out", str(tmp_path / "out"))
    assert code == EXIT_NOT_FOUND and "no such process: 4000000" in err


def test_an_earlier_report_is_never_written_over(tmp_path):
    out = tmp_path / "out"
    (out / "nodes").mkdir(parents=True)
    (out / "nodes" / "n1.json").write_text("{}")  # the only collection taken before the job died, say
    (out / "report.json").write_text('{"headline": "earlier"}')
    code, _, err = run("attach", "--pid", str(os.getpid()), "--out", str(out))
    assert code == EXIT_USAGE and err.splitlines()[0] == f"Error: --out {out} already holds a report (report.json, nodes)"
    assert (out / "report.json").read_text() == '{"headline": "earlier"}' and (out / "nodes" / "n1.json").exists()


@pytest.mark.parametrize("argv", [["analyze", "x.json", "--world-size", "100000000000"],
                                  ["plan", "--gpus", "99999999999999999999999", "--gpus-per-node", "8", "--layers", "2",
                                   "--hidden", "64", "--heads", "4", "--vocab", "128", "--seq-length", "16",
                                   "--global-batch-size", "8"],
                                  ["plan", "--gpus", "8", "--gpus-per-node", "8", "--layers", "2", "--hidden", "64",
                                   "--heads", "4", "--vocab", "128", "--seq-length", "16", "--global-batch-size", "8",
                                   "--gpu-memory", "nan"],
                                  ["attach", "--local", "--timeout", "nan"]])
def test_numbers_that_would_make_work_or_bounds_meaningless_are_refused(argv, capsys):
    code, _, err = run(*argv)
    err += capsys.readouterr().err  # argparse's own errors go to sys.stderr
    assert code == EXIT_USAGE and len(err.splitlines()) == 2 and err.startswith("Error: argument"), err


def test_job_that_does_not_exist_without_slurm_is_an_environment_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no squeue/scontrol/srun here
    pyspy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    code, _, err = run("attach", "--jobid", "12", "--py-spy", pyspy, "--out", str(tmp_path / "o"))
    assert code == EXIT_ENVIRONMENT and err == ("Error: scontrol not found on PATH\nHint: run this on a SLURM login node "
                                                "(or load the SLURM module); Debian/Ubuntu: apt-get install slurm-client\n")


def test_terminal_report_survives_deep_recursion_and_many_ranks():
    deep = tuple(Frame("recurse", "r.py", 3) for _ in range(5000)) + (Frame("main", "r.py", 9),)
    records = [RankRecord(RankIdentity(rank=r, host=f"n{r // 8}", pid=100 + r),
                          [Sample(0, 0.0, "ok", (ThreadStack(100 + r, "MainThread", deep),))]) for r in range(64)]
    verdict = diagnose(Collection(records=records, world_size=64))
    out = io.StringIO()
    render_verdict(verdict, Console(file=out, width=100))
    text = out.getvalue()
    assert "recurse (r.py:3) ×5000" in text and "… 2 more nodes" in text
    assert render_svg(verdict).startswith("<svg") and "<svg" in render_html(verdict)
    json.dumps(verdict_to_dict(verdict))


def test_no_torch_or_deepspeed_anywhere_in_hangdoctor():
    from tests.support import PYTHON, child_env, run_bounded

    code = ("import sys, pkgutil, importlib, hangdoctor\n"
            "for m in pkgutil.walk_packages(hangdoctor.__path__, 'hangdoctor.'):\n"
            "    if not m.name.endswith('__main__'): importlib.import_module(m.name)\n"
            "print(sorted({n.split('.')[0] for n in sys.modules} & {'torch', 'deepspeed', 'numpy', 'pandas'}))")
    result = run_bounded([PYTHON, "-c", code], timeout=60, env=child_env())
    assert result.stdout.strip() == "[]", result.output
