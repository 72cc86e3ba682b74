"""Ties declared by an HF export's config.json (issue 31): the DCP checkpoint of a tied model (both names saved,
nothing says they are one tensor) against its `save_pretrained` export (which drops `lm_head.weight`, its
config saying `tie_word_embeddings`) is the same; with the tie switched off in config.json the dropped name is
missing. Made with transformers and torch.distributed.checkpoint themselves."""

from __future__ import annotations

import io
import json

import pytest
import torch
import torch.distributed.checkpoint as dcp
import transformers
from rich.console import Console

from weightdiff.cli import main


def _cli(*argv) -> tuple[int, str, dict]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*map(str, argv), "--json"], out=Console(file=out, width=160), err=Console(file=err, width=400))
    assert "Traceback" not in err.getvalue()
    return code, err.getvalue(), json.loads(out.getvalue())


@pytest.fixture(scope="module")
def tied(tmp_path_factory):
    root = tmp_path_factory.mktemp("config_ties")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50, n_positions=32)
    model = transformers.GPT2LMHeadModel(config)
    assert model.lm_head.weight is model.transformer.wte.weight
    dcp.save({k: v.clone() for k, v in model.state_dict().items()}, checkpoint_id=str(root / "dcp"))
    model.save_pretrained(root / "export")
    return root


def test_the_export_declares_its_tie_in_config_json_only(tied):
    config = json.loads((tied / "export" / "config.json").read_text())
    assert config.get("tie_word_embeddings", True) is True
    from safetensors import safe_open

    with safe_open(tied / "export" / "model.safetensors", "pt") as f:
        assert "lm_head.weight" not in f.keys() and not (f.metadata() or {}).get("lm_head.weight")


def test_dcp_against_its_export_is_the_same(tied):
    code, err, report = _cli(tied / "dcp", tied / "export")
    assert code == 0 and report["verdict"] == "same", (err, report["params"])


def test_a_config_that_unties_them_leaves_the_name_missing(tied, tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    for f in (tied / "export").iterdir():
        (export / f.name).write_bytes(f.read_bytes())
    config = json.loads((export / "config.json").read_text())
    config["tie_word_embeddings"] = False
    (export / "config.json").write_text(json.dumps(config))
    code, err, report = _cli(tied / "dcp", export)
    assert code == 1 and [(p["name"], p["status"]) for p in report["params"]] == [("lm_head.weight", "missing in b")]
