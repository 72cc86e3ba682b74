"""The light install answers: `pip install hangdoctor` without extras (no numpy, no torch), every verb of every
console script run on small inputs; each one works (exit 0) or says in one `Error:` line which extra it needs
(exit 2), never a traceback.

Real: the wheel is built from this checkout's files (`pip wheel --no-deps --no-build-isolation`, nothing
downloaded) and installed with pip `--no-deps --no-index` into a fresh `python -m venv`, so the console scripts
are pip's own. The core dependencies (pyproject's `dependencies`: py-spy, psutil, rich and what they require) are
linked in from this environment, read from the wheel's own metadata; nothing else is. A last case adds numpy
alone, so that a .pt file read without torch says so too."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hangdoctor.commands import COMMANDS
from tests.hangdoctor.livejobs import Procs
from tests.support import PYTHON, REPO, run_bounded
from tracing.cli import VERBS as TRACING_VERBS
from weightdiff.commands import VERBS as WEIGHTDIFF_VERBS

SCRIPTS = {"hangdoctor": COMMANDS, "weightdiff": WEIGHTDIFF_VERBS, "tracing": TRACING_VERBS}
TRAIN = "pip install 'hangdoctor[train]'"
NODE_FILE = REPO / "tests/hangdoctor/data/trainer_pp2dp2_skip_loss_broadcast.node.json"
MEGATRON_LOG = REPO / "tests/experiments/data/megatron-200b-20nodes.log"


def checkout_files() -> list[str]:
    """This checkout's files as git knows them (tracked, and new ones not ignored): never a build folder."""
    listed = run_bounded(["git", "-C", str(REPO), "ls-files", "--cached", "--others", "--exclude-standard"],
                         timeout=60)
    assert listed.returncode == 0, listed.stderr
    return [name for name in listed.stdout.splitlines() if (REPO / name).is_file()]


def core_requirements(wheel: Path) -> list[str]:
    """The distributions `pip install hangdoctor` brings: the wheel's Requires-Dist without an extra, and theirs."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(archive.read(n).decode() for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    todo = [line.split(":", 1)[1].strip() for line in metadata.splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line]
    found: list[str] = []
    while todo:
        name = re.match(r"[A-Za-z0-9_.-]+", todo.pop()).group(0)
        if name.lower() in (n.lower() for n in found):
            continue
        found.append(name)
        todo += [req for req in importlib.metadata.requires(name) or [] if "extra ==" not in req]
    return found


def link_distribution(name: str, site: Path, bin_dir: Path) -> None:
    """Make an installed distribution importable in the fresh venv: its top-level folders and files, its
    dist-info, and its executables (py-spy's binary), as symbolic links."""
    dist = importlib.metadata.distribution(name)
    for entry in dist.files or []:
        parts = Path(entry).parts
        source = Path(dist.locate_file(entry))
        if parts[0] == "..":  # ../../../bin/py-spy
            if "bin" in parts and not (bin_dir / source.name).exists():
                (bin_dir / source.name).symlink_to(source)
            continue
        top = Path(dist.locate_file(parts[0]))
        if not (site / parts[0]).exists() and top.exists():
            (site / parts[0]).symlink_to(top)


@pytest.fixture(scope="module")
def light(tmp_path_factory):
    """(venv folder, environment to run its scripts in) for the core install without extras."""
    tmp = tmp_path_factory.mktemp("light")
    source = tmp / "src"
    for name in checkout_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    built = run_bounded([PYTHON, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                         "-w", str(tmp / "dist"), str(source)], timeout=300)
    assert built.returncode == 0, built.output[-3000:]
    wheel = next((tmp / "dist").glob("hangdoctor-*.whl"))
    venv = tmp / "venv"
    base = getattr(sys, "_base_executable", None) or sys.executable  # the interpreter under this venv
    made = run_bounded([base, "-m", "venv", str(venv)], timeout=300)
    assert made.returncode == 0, made.output[-3000:]
    # Without this checkout on PYTHONPATH: pip would take its hangdoctor.egg-info (an editable install's) for the
    # package already installed, and install nothing.
    clean = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    installed = run_bounded([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                             "--disable-pip-version-check", str(wheel)], timeout=300, env=clean, cwd=tmp)
    assert installed.returncode == 0, installed.output[-3000:]
    assert (venv / "bin" / "hangdoctor").exists(), f"pip installed no hangdoctor script: {installed.output[-3000:]}"
    site = Path(run_bounded([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
                             "['purelib'])"], timeout=60).stdout.strip())
    for name in core_requirements(wheel):
        link_distribution(name, site, venv / "bin")
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    env.update(PATH=f"{venv / 'bin'}:/usr/bin:/bin", PYTHONFAULTHANDLER="1", COLUMNS="120")
    absent = run_bounded([str(venv / "bin" / "python"), "-c", "import importlib.util as u; print([m for m in "
                          "('numpy', 'torch', 'matplotlib') if u.find_spec(m)])"], timeout=60, env=env)
    assert absent.stdout.strip() == "[]", "the light venv must have no extra"
    return venv, env


def run_script(light, script: str, *args: str, extra_path: Path | None = None):
    venv, env = light
    if extra_path is not None:
        env = dict(env, PYTHONPATH=str(extra_path))
    return run_bounded([str(venv / "bin" / script), *map(str, args)], timeout=120, env=env, cwd=venv.parent)


ENDING, RING = "<a process that ends while watched>", "<the ring file tracing run wrote>"  # filled in when run


def cases(tmp: Path, sleeper: int) -> list[tuple[str, list, str | None]]:
    """(script, argv, what it says it needs or None when it must work) for every verb of every console script."""
    program = tmp / "work.py"
    program.write_text("def step(x):\n    return x + 1\n\nfor i in range(3):\n    step(i)\n")
    traces, pt = tmp / "traces", tmp / "pt"
    return [
        ("hangdoctor", ["analyze", NODE_FILE], None),
        ("hangdoctor", ["attach", "--pid", sleeper, "--samples", "1", "--out", tmp / "attach"], None),
        ("hangdoctor", ["watch", "--pid", ENDING, "--heartbeat", program, "--stall", "60", "--poll", "0.2", "--out",
                        tmp / "watch"], None),
        ("hangdoctor", ["plan", "--gpus", "8", "--gpus-per-node", "8", "--layers", "4", "--hidden", "64", "--heads",
                        "4", "--vocab", "1024", "--seq-length", "128", "--global-batch-size", "16"], None),
        ("hangdoctor", ["experiment", "--logs", MEGATRON_LOG, "--warmup", "0", "--out", tmp / "tables"], None),
        ("hangdoctor", ["experiment", "--config", "one=--gpus 1", "--launcher", "torchrun", "--out", tmp / "exp"],
         f"torch and deepspeed: {TRAIN}"),
        ("weightdiff", [pt / "a", pt / "b"], f"numpy: {TRAIN}"),
        ("weightdiff", ["diff", pt / "a", pt / "b"], f"numpy: {TRAIN}"),
        ("weightdiff", ["check", pt / "a"], f"numpy: {TRAIN}"),
        ("weightdiff", ["drift", pt / "a", "w"], f"numpy: {TRAIN}"),
        ("tracing", ["run", "--include", "__main__", "--out", traces, "--", program], None),
        ("tracing", ["env", "--include", "trainer", "--out", traces], None),
        ("tracing", ["last", traces], None),
        ("tracing", ["diverge", traces], None),
        ("tracing", ["export", traces, "-o", tmp / "trace.json"], None),
        ("tracing", ["show", RING], None),
    ]


def test_every_verb_of_the_light_install_works_or_names_its_extra(light, tmp_path):
    pt = tmp_path / "pt"
    for side in ("a", "b"):
        (pt / side).mkdir(parents=True)
        (pt / side / "pytorch_model.bin").write_bytes(b"")  # never opened: numpy is asked for first
    ending = []
    try:
        with Procs() as procs:
            sleeper = procs.start("sleeper", RANK="0")
            done = set()
            for script, argv, needs in cases(tmp_path, sleeper):
                if ENDING in argv:  # started now, so that it is alive when the watch begins and ends soon after
                    ending.append(subprocess.Popen(["sleep", "2"], start_new_session=True))
                    argv = [ending[-1].pid if arg == ENDING else arg for arg in argv]
                if RING in argv:
                    argv = [next((tmp_path / "traces").glob("trace-*.ring")) if arg == RING else arg for arg in argv]
                result = run_script(light, script, *argv)
                what = f"{script} {' '.join(map(str, argv))}"
                assert "Traceback" not in result.stderr, f"{what}: {result.stderr[-3000:]}"
                verb = argv[0] if argv[0] in SCRIPTS[script] else "diff"
                if needs is None:
                    assert result.returncode == 0, f"{what}: {result.output[-3000:]}"
                else:
                    assert result.returncode == 2, f"{what}: {result.output[-3000:]}"
                    assert result.stderr.splitlines()[0] == f"Error: {script} {verb} needs {needs}", result.stderr
                done.add((script, verb))
    finally:
        for proc in ending:
            proc.kill()
            proc.wait(timeout=30)
    assert done == {(script, verb) for script, verbs in SCRIPTS.items() for verb in verbs}  # every verb, no less


def test_with_numpy_alone_a_torch_file_names_torch(light, tmp_path):
    torch = pytest.importorskip("torch")  # this environment's torch writes the file the light install reads
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        torch.save({"w": torch.ones(3)}, tmp_path / side / "pytorch_model.bin")
    numpy_only = tmp_path / "numpy-only"
    numpy_only.mkdir()
    location = Path(importlib.util.find_spec("numpy").origin).parent
    for folder in (location, location.with_name("numpy.libs")):  # numpy.libs: its wheel's bundled libraries
        if folder.exists():
            (numpy_only / folder.name).symlink_to(folder)
    result = run_script(light, "weightdiff", tmp_path / "a", tmp_path / "b", extra_path=numpy_only)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.output[-3000:]
    assert result.stderr.splitlines() == [f"Error: weightdiff diff needs torch: {TRAIN}"]


def test_the_wheel_installs_only_the_projects_own_import_names(light):
    """`pip install hangdoctor` puts four import names on a machine; none is a generic word another package owns
    (topology, experiments, throughput, clicore live inside hangdoctor; the reference trainer runs from a checkout)."""
    venv, _ = light
    wheel = next((venv.parent / "dist").glob("hangdoctor-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/", 1)[0] for name in archive.namelist() if "/" in name}
    tops = {top for top in tops if not top.endswith((".dist-info", ".data"))}
    assert tops == {"hangdoctor", "weightdiff", "tracing", "slurm"}
