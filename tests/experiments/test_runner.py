"""The runner end to end on real local processes (fixtures/iterations.py): a hung run is diagnosed by a real
`hangdoctor attach` (py-spy) while it still hangs, and only then stopped; figures, CSV, markdown and PNG follow.
The sbatch and torchrun launchers with the real trainer are in test_sbatch_matrix.py and test_torchrun.py."""

import json

import pandas as pd
import pytest
from matplotlib.image import imread

from hangdoctor.experiments.hang import summary_line
from hangdoctor.request import AttachRequest
from hangdoctor.experiments.matrix import build_matrix
from hangdoctor.experiments.outputs import load_results, write_outputs
from hangdoctor.experiments.runner import Events, RunnerOptions, run_matrix
from hangdoctor.experiments.watchdog import Limits
from tests.experiments.proclauncher import ProcessLauncher

LIMITS = Limits(hang_timeout=2.0, startup_timeout=30, run_timeout=60, poll_interval=0.1)


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    out = tmp_path_factory.mktemp("experiment")
    matrix = build_matrix(configs=["ok=--lines 5 --interval 0.05", "hangs=--lines 4 --interval 0.05 --then hang",
                                   "dies=--lines 1 --interval 0.05 --then exit:1 --error boom"],
                          toggles=["FIXTURE_TOGGLE=a,b"])
    launcher = ProcessLauncher()
    try:
        results = run_matrix(matrix, launcher, out, RunnerOptions(limits=LIMITS, attach=AttachRequest(timeout=30)))
    finally:
        launcher.kill_all()
    return out, matrix, launcher, results


def test_statuses_and_figures_from_the_logs(experiment):
    out, _, _, results = experiment
    assert [(r.config, r.toggles["FIXTURE_TOGGLE"], r.status) for r in results] == [
        ("ok", "a", "completed"), ("ok", "b", "completed"), ("hangs", "a", "hung"), ("hangs", "b", "hung"),
        ("dies", "a", "failed"), ("dies", "b", "failed")]
    ok = results[0]
    # The fixture's iteration i takes 50 x i ms: iterations 3-5 after the 2 warm-up ones, median 200 ms.
    assert (ok.sec_per_it, ok.samples_per_s, ok.tokens_per_s) == (0.2, 40.0, 1280.0)
    assert ok.measured_over == "median of iterations 3-5" and ok.tflops == 0.01  # no shape: the printed figure
    hung = results[2]
    assert hung.sec_per_it == pytest.approx(0.175) and hung.measured_over == "median of iterations 3-4"
    dead = results[4]
    assert (dead.exit_code, dead.error, dead.sec_per_it) == (1, "Error: boom", None)
    assert dead.measured_over == "no figure: only 1 iteration(s) (1), all within the warm-up of 2"


def test_a_hung_run_is_diagnosed_by_hangdoctor_before_it_is_stopped(experiment):
    out, _, launcher, results = experiment
    hung = results[2]
    assert hung.reason == "no new iteration line for 2s after iteration 4"
    folder = out / "runs" / hung.run / "hangdoctor"
    verdict = json.loads((folder / "verdict.json").read_text())
    # py-spy read the live process twice and saw it sleeping in the same place: it was still there.
    assert verdict["hung"] is True and verdict["responded"]["count"] == 1 and verdict["samples"] == 2
    assert any(frame["name"] == "main" for cls in verdict["classes"] for frame in cls["stack"])
    assert hung.verdict == (folder / "verdict.txt").read_text().strip() == summary_line(verdict)
    assert hung.verdict.startswith(verdict["headline"])
    assert hung.verdict_hung is True and (folder / "report.json").exists() and (folder / "report.html").exists()
    assert launcher.alive_at_stop[int(hung.job.split()[1])] is True and hung.stopped == "killed"
    assert all(launcher.procs[pid].poll() is not None for pid in launcher.procs)  # nothing left running


def test_results_are_kept_per_run_and_resume_runs_nothing_again(experiment, tmp_path):
    out, matrix, _, results = experiment
    assert load_results(out) == results
    again = ProcessLauncher()
    assert run_matrix(matrix, again, out, RunnerOptions(limits=LIMITS, resume=True)) == results
    assert again.procs == {}


def test_csv_markdown_and_plots(experiment, tmp_path):
    out, _, _, results = experiment
    written = write_outputs(results, tmp_path, title="fixture runs")
    assert [p.name for p in written] == ["results.csv", "results.json", "results.md", "throughput.png", "tflops.png"]
    frame = pd.read_csv(tmp_path / "results.csv")
    assert list(frame["status"]) == ["completed", "completed", "hung", "hung", "failed", "failed"]
    assert list(frame["FIXTURE_TOGGLE"]) == ["a", "b"] * 3
    assert frame["last_iteration"].tolist() == [5, 5, 4, 4, 1, 1]  # integers, not 5.0
    markdown = (tmp_path / "results.md").read_text().splitlines()
    assert markdown[2] == "| Config | GPUs | Size | DP | TP | PP | MBS | GBS | FIXTURE_TOGGLE | Sec/it | TFLOPs | " \
                          "Samples/s | Tokens/s | Notes |"
    assert markdown[4] == "| ok | 1 | - | 1 | 1 | 1 | - | 8 | a | 0.200 | 0.0100 | 40.00 | 1,280.00 |  |"
    # Each figure is its own median: samples/s of iterations 3 and 4 are 53.33 and 40.
    assert markdown[6].startswith("| hangs | 1 | - | 1 | 1 | 1 | - | 8 | a | 0.175 | 0.0100 | 46.67 | 1,493.33 | "
                                  "hung after iteration 4 (median of iterations 3-4): HUNG: 1 rank stuck")
    assert markdown[8].endswith("| failed after iteration 1: Error: boom |")
    assert markdown[-1].startswith("* Sec/it, TFLOPs, samples/s and tokens/s: median of iterations 3-5 of each run "
                                   "unless its note says otherwise (the first 2 iterations are warm-up).")
    assert json.loads((tmp_path / "results.json").read_text())["runs"][2]["status"] == "hung"
    image = imread(tmp_path / "throughput.png")
    assert image.shape[0] > 300 and image.shape[1] > 500
    assert _has_colour(image, (0xd6, 0x27, 0x28)), "hung runs are marked with a red X"
    write_outputs(results[:2], tmp_path / "healthy")
    assert not _has_colour(imread(tmp_path / "healthy" / "throughput.png"), (0xd6, 0x27, 0x28))


def _has_colour(image, rgb) -> bool:
    pixels = (image[:, :, :3] * 255).round()
    return bool(((abs(pixels - rgb) <= 2).all(axis=2)).sum() > 20)


def test_an_interrupted_run_is_stopped_kept_aside_and_run_again_on_resume(tmp_path):
    matrix = build_matrix(configs=["first=--lines 3 --interval 0.05", "slow=--lines 0 --then forever --interval 0.05"])

    def interrupt(spec, parsed):
        if spec.config.name == "slow" and parsed.iteration == 4:
            raise KeyboardInterrupt

    launcher = ProcessLauncher()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_matrix(matrix, launcher, tmp_path, RunnerOptions(limits=LIMITS), Events(iteration=interrupt))
    finally:
        launcher.kill_all()
    first, slow = load_results(tmp_path)
    assert (first.status, slow.status, slow.stopped) == ("completed", "interrupted", "killed")
    assert slow.last_iteration >= 4 and slow.sec_per_it is not None  # what it printed is measured all the same
    assert launcher.alive_at_stop[int(slow.job.split()[1])] is True  # it was still running: the runner stopped it
    again = ProcessLauncher(argv_of=lambda spec: ["--lines", "3", "--interval", "0.05"])
    try:
        results = run_matrix(matrix, again, tmp_path, RunnerOptions(limits=LIMITS, resume=True))
    finally:
        again.kill_all()
    assert [r.status for r in results] == ["completed", "completed"] and len(again.procs) == 1
    assert results[0] == first
    aside = list((tmp_path / "interrupted").iterdir())
    assert len(aside) == 1 and aside[0].name.startswith(slow.run + "-")
    assert json.loads((aside[0] / "result.json").read_text())["status"] == "interrupted"
    assert load_results(tmp_path) == results
