"""Each live corpus case run for real: the hang is started again (torchrun, spawn or the deepspeed launcher, gloo
on CPU), `hangdoctor attach --pid <every Python process of the job> --json` is asked once, when every rank has
said it is about to block, and its verdict must meet the case's expectations for the `attach` form. No retry:
the first answer is the one that counts.

A case spends most of its ten seconds waiting (for the ready markers' settle time, between attach's two samples),
so the selected cases run HD_LIVE_PARALLEL at a time (default 3) in a pool started with the first of them, in the
tests' order; each test waits for its own case's result. HD_LIVE_PARALLEL=1 runs them one by one.

The live cases are most of the suite's time (each a real job of 2-4 ranks started: 10-40 s on 2 cores), so a run
starts a share of them: one in HD_LIVE_SHARE (default 6), which one by the commit (the number of commits to HEAD,
so consecutive commits take the shares in turn and every case runs once in any four); the others are skipped and
say so. Every case's recorded `attach` form is read at every commit all the same (test_corpus.py): what a share
leaves out is only the fresh start of its program. HD_LIVE_ALL=1 (or HD_LIVE_SHARE=1) runs every case."""

import json
import os
import subprocess
import time
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.hangdoctor.corpus.check import CORPUS, entries, known_miss, problems
from tests.hangdoctor.corpus.live import LiveJob, load_cases
from tests.support import PYTHON, REPO, child_env, run_bounded

IN_FLIGHT = max(1, int(os.environ.get("HD_LIVE_PARALLEL", "3")))
SHARES_BY_DEFAULT = 6
SHARES = 1 if os.environ.get("HD_LIVE_ALL") == "1" else \
    max(1, int(os.environ.get("HD_LIVE_SHARE", str(SHARES_BY_DEFAULT))))


def _turn() -> int:
    """Which share this commit runs: the number of commits to HEAD, modulo SHARES (0 outside a git checkout)."""
    try:
        done = subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=30)
        return int(done.stdout.strip()) % SHARES
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return 0


def share_of(name: str, shares: int) -> int:
    """A case's share: fixed by its name (crc32), so a case keeps its share as cases are added."""
    return zlib.crc32(name.encode()) % shares


TURN = _turn() if SHARES > 1 else 0


def _param(name: str):
    """A live case whose attach form is a known miss (case.json's known_miss, or known_miss_live for what only
    this test's `attach --pid` misses) is expected to fail, strictly. One whose live verdict depends on where
    py-spy happens to catch its ranks (case.json's `live_unstable`, with why) may fail, and says so."""
    case = json.loads((CORPUS / name / "case.json").read_text())
    if share_of(name, SHARES) != TURN:
        return pytest.param(name, marks=[pytest.mark.skip(
            reason=f"this commit runs share {TURN + 1} of {SHARES} of the live cases (HD_LIVE_ALL=1 runs every one); "
                   "its recorded attach form ran in test_corpus.py")])
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


@dataclass
class LiveAnswer:
    returncode: int
    stdout: str
    output: str


# Cases side by side share two cores: from a rank's ready marker to inside its blocking call takes longer than the
# case's own settle time (recorded alone) allows, and a rank caught on its way in reads as progressing.
SHARED_SETTLE = 1.5 if IN_FLIGHT > 1 else 0.0


def run_case(name: str, workdir: Path) -> LiveAnswer:
    """Start the case's hang, attach once when it is ready, stop it."""
    with LiveJob(load_cases()[name], workdir / "job") as job:
        time.sleep(SHARED_SETTLE)
        pids = job.python_pids()
        done = run_bounded([PYTHON, "-m", "hangdoctor", "attach", "--pid", *map(str, pids), "--json",
                            "--out", str(workdir / "out")], timeout=180, env=child_env(), cwd=REPO)
    return LiveAnswer(done.returncode, done.stdout, done.output)


@pytest.fixture(scope="module")
def live_answers(request, tmp_path_factory):
    """name -> Future[LiveAnswer], for every selected case of this module, submitted in the tests' order."""
    names = [item.callspec.params["name"] for item in request.session.items
             if item.module is request.module and item.originalname == "test_live_case_attach"
             and item.get_closest_marker("skip") is None]
    pool = ThreadPoolExecutor(max_workers=IN_FLIGHT, thread_name_prefix="live-case")
    futures: dict[str, Future] = {name: pool.submit(run_case, name, tmp_path_factory.mktemp(name)) for name in names}
    yield futures
    for future in futures.values():
        future.cancel()
    pool.shutdown(wait=True)  # a running case is bounded by its start timeout and attach's own timeout


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", [_param(name) for name in LIVE])
def test_live_case_attach(name, live_answers):
    expect = attach_expectations(name)
    done = live_answers[name].result(timeout=550)
    assert done.returncode in (0, 1), done.output[-3000:]
    verdict = json.loads(done.stdout)
    found = problems(verdict, expect, done.returncode)
    assert not found, "\n".join(found + [verdict["headline"], *(f"suspect {s['folded']}: {s['kind']} "
                                         f"{s['confidence']}: {s['reason']}" for s in verdict["suspects"])])


def test_every_live_case_has_a_corpus_folder():
    assert LIVE and all((CORPUS / name / "case.json").is_file() for name in LIVE)


def test_the_shares_cover_every_live_case_and_split_them_about_evenly():
    """Consecutive commits run every case once between them, each about an equal share."""
    counts = [sum(share_of(name, SHARES_BY_DEFAULT) == turn for name in LIVE) for turn in range(SHARES_BY_DEFAULT)]
    assert sum(counts) == len(LIVE), counts
    assert min(counts) >= len(LIVE) // SHARES_BY_DEFAULT - len(LIVE) // 10, counts
