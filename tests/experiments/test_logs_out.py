"""`experiment --logs ... --out DIR` never replaces what DIR holds: an experiment's tables, or a user's own
results files. Refused before any log is read, one line, exit 2, the files untouched."""

import json
from pathlib import Path

import pytest

from hangdoctor.clicore.errors import EXIT_USAGE
from hangdoctor.cli import main
LOG = Path(__file__).parent / "data" / "pp2-sbatch" / "train.log"


@pytest.mark.parametrize("existing, message", [
    ({"matrix.json": json.dumps({"configs": []}), "results.csv": "run,tflops\na,1\n"}, "holds an experiment"),
    ({"results.csv": "my,own\n1,2\n"}, "already has results.csv"),
    ({"throughput.png": "not ours"}, "already has throughput.png"),
])
def test_logs_never_replace_earlier_tables(tmp_path, capsys, existing, message):
    out = tmp_path / "out"
    out.mkdir()
    for name, text in existing.items():
        (out / name).write_text(text)
    assert main(["experiment", "--logs", str(LOG), "--out", str(out)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and message in err.splitlines()[0] and "Traceback" not in err
    assert {p.name: p.read_text() for p in out.iterdir()} == existing


def test_logs_write_into_a_new_folder(tmp_path, capsys):
    assert main(["experiment", "--logs", str(LOG), "--out", str(tmp_path / "t")]) == 0
    assert (tmp_path / "t" / "results.csv").exists()
