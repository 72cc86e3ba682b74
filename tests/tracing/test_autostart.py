"""Tracing an unmodified program through the environment: `eval "$(tracing env ...)"`, then run it as usual."""

from __future__ import annotations

import json

from tests.support import PYTHON, REPO, child_env, run_bounded
from tests.tracing.helpers import FIXTURES
from tracing.ringreader import read_ring

SCRIPT = FIXTURES / "plain_script.py"


def in_shell(script: str, tmp_path, **env: str):
    return run_bounded(["bash", "-c", script], timeout=120, env=child_env(**env), cwd=tmp_path)


def test_env_exports_trace_an_unmodified_program_and_not_its_children(tmp_path):
    out = tmp_path / "traces"
    done = in_shell(f'eval "$({PYTHON} -m tracing env --include __main__ --out {out})" && '
                    f"RANK=2 LOCAL_RANK=1 {PYTHON} {SCRIPT} && cd {REPO} && {PYTHON} -m tracing last {out} --json",
                    tmp_path)
    assert done.returncode == 0, done.output
    assert "child ran" in done.stdout and "program done" in done.stdout
    rings = list(out.glob("*.ring"))
    assert len(rings) == 1, rings  # not the child (same rank), not `tracing last` (our own CLI)
    assert rings[0].name.startswith("trace-") and "-1-" in rings[0].name  # local rank 1 in the seed's name
    trace = read_ring(str(rings[0]))
    assert trace.identity.rank == 2 and trace.identity.rank_source == "RANK"
    assert trace.state_word == "exited"
    assert [e.loc.qualname for e in trace.events] == ["<module>", "main", "compute", "compute", "main", "<module>"]
    report = json.loads(done.stdout[done.stdout.index("{"):])
    assert report["ranks"][0]["condition"] == "exited"


def test_bad_settings_warn_and_the_program_still_runs(tmp_path):
    done = in_shell(f"{PYTHON} {SCRIPT}", tmp_path, HANGDOCTOR_TRACE="include=__main__;ring=lots",
                    PYTHONPATH=f"{REPO}/tracing/sitedir:{REPO}")
    assert done.returncode == 0
    assert "program done" in done.stdout
    assert done.stderr.splitlines()[0] == ("Warning: HANGDOCTOR_TRACE is set but tracing is off: HANGDOCTOR_TRACE: "
                                           "ring='lots' is not a number of events")
    assert not list(tmp_path.rglob("*.ring"))


def test_ranks_filter_and_other_sitecustomize_still_runs(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text(f"open({str(tmp_path / 'marker')!r}, 'w').close()\n")
    pythonpath = f"{REPO}/tracing/sitedir:{other}:{REPO}"
    setting = f"include=__main__;out={tmp_path / 'traces'};ranks=1"
    for rank in ("0", "1"):
        done = in_shell(f"{PYTHON} {SCRIPT}", tmp_path, HANGDOCTOR_TRACE=setting, PYTHONPATH=pythonpath, RANK=rank)
        assert done.returncode == 0, done.output
    assert (tmp_path / "marker").exists()
    rings = list((tmp_path / "traces").glob("*.ring"))
    assert [read_ring(str(r)).identity.rank for r in rings] == [1]
