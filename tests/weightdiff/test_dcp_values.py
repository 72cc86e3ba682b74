"""DCP's non-tensor entries (issue 31): what `get_state_dict(model, optimizer)` writes besides tensors (learning
rates, betas, step counts, flags) is compared like any tensor, so a changed learning rate is never SAME; an entry
that would need an unsafe global to load is unreadable and named; a damaged .distcp file is no traceback. The
checkpoints are written by torch's own `dcp.save` (one process, no process group)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict

from tests.weightdiff.cli_run import run_cli


class Opaque:
    """A value torch.load(weights_only=True) refuses: an instance of a class of the user's."""


def _cli(argv):
    code, out, err, _ = run_cli(argv)
    return code, out, err


def save(folder: Path, lr: float, extra: dict | None = None) -> Path:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 3))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.ones(2, 64)).sum().backward()
    opt.step()
    for group in opt.param_groups:
        group["lr"] = lr
    msd, osd = get_state_dict(model, opt)
    dcp.save({"model": msd, "optim": osd, "extra": {"epoch": 3, "note": "warmup", **(extra or {})}},
             checkpoint_id=str(folder))
    return folder


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    root = tmp_path_factory.mktemp("dcp_values")
    return {name: save(root / name, lr) for name, lr in (("a", 1e-3), ("a2", 1e-3), ("lr", 5e-4))}


def test_a_changed_learning_rate_alone_is_different(ckpts):
    code, out, _ = _cli([str(ckpts["a"]), str(ckpts["lr"])])
    assert code == 1 and "optim.param_groups.0.lr (value)  differs" in out and "2." not in out.split("DIFFERENT")[1], out


def test_the_same_state_with_its_values_is_same(ckpts):
    code, out, _ = _cli([str(ckpts["a"]), str(ckpts["a2"])])
    assert code == 0 and "SAME" in out, out
    n_tensors = int(out.split("compared 1 rank pair, ")[1].split(" tensors")[0])
    assert n_tensors > 20, out  # the 4 weights, their Adam moments and steps, and the values beside them


def test_an_entry_that_needs_an_unsafe_global_is_named_never_same(ckpts, tmp_path):
    other = save(tmp_path / "opaque", 1e-3, {"hook": Opaque()})
    code, out, _ = _cli([str(ckpts["a"]), str(other)])
    assert code != 0 and "SAME" not in out and "could not be read" in out, out


def test_a_damaged_distcp_file_is_not_a_traceback(ckpts, tmp_path):
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for f in ckpts["a"].iterdir():
        data = f.read_bytes()
        if f.suffix == ".distcp":
            assert len(data) > 8192
            data = b"\0" * 4096 + data[4096:]
        (damaged / f.name).write_bytes(data)
    code, out, _ = _cli([str(ckpts["a"]), str(damaged)])
    assert code != 0 and "SAME" not in out, out


def test_a_torchtitan_folder_reads_its_newest_step_and_says_so(ckpts, tmp_path):
    import shutil

    titan = tmp_path / "checkpoint"
    shutil.copytree(ckpts["a"], titan / "step-10")
    shutil.copytree(ckpts["lr"], titan / "step-20")  # the newest: its learning rate differs from a's
    code, out, err = _cli([str(titan), str(ckpts["a"])])
    assert code == 1 and "optim.param_groups.0.lr (value)  differs" in out, out
    assert "read step-20, the newest checkpoint in it" in err
