"""Under a real torchrun: the wrapper in place of the script, and the environment variable with an unmodified
script. The hang is a real gloo deadlock (fixtures/gloo_hang.py)."""

from __future__ import annotations

import pytest

from tests.support import PYTHON, REPO, child_env, run_bounded
from tests.tracing.helpers import FIXTURES, Background, last_json
from tracing.ringreader import read_ring

torch = pytest.importorskip("torch")
TORCHRUN = [PYTHON, "-m", "torch.distributed.run", "--standalone"]


def test_wrapper_under_torchrun_names_the_collectives_of_a_gloo_hang(tmp_path):
    out = tmp_path / "traces"
    with Background() as bg:
        bg.start([*TORCHRUN, "--nproc-per-node", "4", "-m", "tracing", "run", "--c-calls",
                  "--include", "__main__,torch.distributed.distributed_c10d", "--out", str(out), "--",
                  str(FIXTURES / "gloo_hang.py")], env=child_env(READY_DIR=str(tmp_path), HANG_SECONDS="120"))
        bg.wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == 4, 120, "4 gloo ranks blocking")
        bg.pids.update(read_ring(str(p)).identity.pid for p in out.glob("*.ring"))
        # A rank creates its ready file just before it calls the collective: give the C call a moment to start.
        bg.wait_for(lambda: all(g["open_frames"] and g["open_frames"][-1]["is_c"] for g in last_json(out)["groups"]),
                    60, "all ranks inside the collective's C call")
        report = last_json(out)
        groups = {g["ranks_text"]: [f["qualname"] for f in g["open_frames"]] for g in report["groups"]}
        assert set(groups) == {"0-1", "2-3"}
        assert groups["0-1"][:-1] == ["<module>", "main", "train", "_aggregate_total_loss", "broadcast"]
        assert groups["2-3"][:-1] == ["<module>", "main", "train", "all_reduce"]
        # gloo's Work.wait, a pybind11 method: the setprofile backend (3.11) cannot see its receiver's class.
        assert groups["0-1"][-1] == groups["2-3"][-1] == "wait"
        # Each frame's executing line, as py-spy prints it: the call it is in (the C call's line for broadcast).
        source = (FIXTURES / "gloo_hang.py").read_text().splitlines()
        stuck = next(g for g in report["groups"] if g["ranks_text"] == "0-1")["open_frames"]
        lines = {f["qualname"]: (f["line"], f["line_source"]) for f in stuck}
        assert source[lines["_aggregate_total_loss"][0] - 1].strip() == "dist.broadcast(loss, src=2, group=group)"
        assert source[lines["train"][0] - 1].strip() == "_aggregate_total_loss(value, loss_group, rank)"
        assert lines["broadcast"][1] == "executing" and lines["wait"] == (0, "def")
        assert {r["rank"]: r["condition"] for r in report["ranks"]} == dict.fromkeys(range(4), "running")


def test_environment_variable_under_torchrun_traces_the_workers_only(tmp_path):
    out = tmp_path / "traces"
    script = (f'eval "$({PYTHON} -m tracing env --include __main__ --out {out})" && '
              f"{' '.join(TORCHRUN)} --nproc-per-node 2 {FIXTURES / 'plain_script.py'}")
    done = run_bounded(["bash", "-c", script], timeout=180, env=child_env(), cwd=REPO)
    assert done.returncode == 0, done.output
    traces = sorted((read_ring(str(p)) for p in out.glob("*.ring")), key=lambda t: t.identity.rank)
    assert [(t.identity.rank, t.identity.local_rank, t.identity.world_size) for t in traces] == [(0, 0, 2), (1, 1, 2)]
    assert all(t.state_word == "exited" for t in traces)
    assert all([e.loc.qualname for e in t.events][:3] == ["<module>", "main", "compute"] for t in traces)
