"""Each live corpus case run for real: the hang is started again (torchrun, spawn or the deepspeed launcher, gloo
on CPU), `hangdoctor attach --pid <every Python process of the job> --json` is asked once, when every rank has
said it is about to block, and its verdict must meet the case's expectations for the `attach` form. No retry:
the first answer is the one that counts."""

import json

import pytest

from tests.hangdoctor.corpus.check import CORPUS, entries, known_miss, problems
from tests.hangdoctor.corpus.live import LiveJob, load_cases
from tests.support import PYTHON, REPO, child_env, run_bounded

def _param(name: str):
    """A live case whose attach form is a known miss (case.json's known_miss, or known_miss_live for what only
    this test's `attach --pid` misses) is expected to fail, strictly. One whose live verdict depends on where
    py-spy happens to catch its ranks (case.json's `live_unstable`, with why) may fail, and says so."""
    case = json.loads((CORPUS / name / "case.json").read_text())
    why = known_miss(CORPUS / name, {"paths": ["attach"]}) or case.get("known_miss_live")
    if why:
        return pytest.param(name, marks=[pytest.mark.xfail(reason=why, strict=True)])
    if case.get("live_unstable"):
        return pytest.param(name, marks=[pytest.mark.xfail(reason=case["live_unstable"], strict=False)])
    return pytest.param(name)


LIVE = sorted(name for name, case in load_cases().items() if not case.shape and not case.gpu)


def attach_expectations(name: str) -> dict:
    for entry, expect in entries(CORPUS / name):
        if entry["paths"] == ["attach"]:
            return expect
    raise AssertionError(f"{name}: case.json has no attach entry")


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("name", [_param(name) for name in LIVE])
def test_live_case_attach(name, tmp_path):
    expect = attach_expectations(name)
    with LiveJob(load_cases()[name], tmp_path / "job") as job:
        pids = job.python_pids()
        done = run_bounded([PYTHON, "-m", "hangdoctor", "attach", "--pid", *map(str, pids), "--json",
                            "--out", str(tmp_path / "out")], timeout=180, env=child_env(), cwd=REPO)
    assert done.returncode in (0, 1), done.output[-3000:]
    verdict = json.loads(done.stdout)
    found = problems(verdict, expect, done.returncode)
    assert not found, "\n".join(found + [verdict["headline"], *(f"suspect {s['folded']}: {s['kind']} "
                                         f"{s['confidence']}: {s['reason']}" for s in verdict["suspects"])])


def test_every_live_case_has_a_corpus_folder():
    assert LIVE and all((CORPUS / name / "case.json").is_file() for name in LIVE)
