"""The terminal report reads well: hanging indents at 80 columns (continuation lines stay under their item), no
rank set said twice when the topology is unknown, and no wrapping at 80 columns when piped into a file."""

import io
import re
from pathlib import Path

from rich.console import Console

from hangdoctor.analysis.verdict import diagnose
from hangdoctor.formats.load import load_paths
from hangdoctor.identity import TopologyFlags
from hangdoctor.render.terminal import verdict_panel
from tests.support import PYTHON, REPO, child_env, run_bounded

DATA = Path(__file__).parent / "data"
SECTIONS = ("Who is where", "Did not respond", "Suspects", "Set aside", "Hints")


def panel_lines(path: Path, width: int, flags: TopologyFlags = TopologyFlags()) -> list[str]:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(verdict_panel(diagnose(load_paths([path], flags))))
    return [line[2:-2] for line in console.file.getvalue().splitlines()[1:-1]]  # inside the borders


def test_continuation_lines_hang_under_their_item_at_80_columns():
    body = panel_lines(DATA / "gloo8_mixed.node.json", 80)
    start = body.index("Who is where".ljust(len(body[0])))
    items = [line for line in body[start:] if line.strip() and not line.startswith(SECTIONS)]
    assert len(items) > 20  # the places, suspects and hints of this recording wrap over many lines at 80
    assert all(line.startswith("  ") for line in items), [line for line in items if not line.startswith("  ")]
    # each rank set stands alone on the left: the lines that continue an item start under its text
    end = next(i for i, line in enumerate(body) if line.startswith("Did not respond"))
    who = body[start + 1:end]
    firsts = [line for line in who if line.startswith("  rank")]
    text_column = firsts[0].index("pp=")  # "  ranks 0-1,3  pp=0 dp=0 ...": the text starts after the rank set
    assert len(firsts) == 3 and len(who) > 3
    for line in who:
        if not line.startswith("  rank"):
            assert line[:text_column].strip() == "" and line[text_column] != " ", (line, text_column)
    hints = body[body.index("Hints".ljust(len(body[0]))) + 1:]
    assert all(line.startswith(("  - ", "    ")) for line in hints if line.strip()), hints


def test_a_rank_set_is_not_said_twice_without_a_topology():
    path = DATA / "rank4.pyspy.json"  # a bare py-spy dump: no argv, no WORLD_SIZE, so no topology
    assert diagnose(load_paths([path], TopologyFlags())).dims is None
    body = "\n".join(panel_lines(path, 160))
    assert re.search(r"rank \d+  (is|waits in) ", body), body
    assert not re.search(r"ranks? ([\d,-]+)  ranks? \1", body), body


def test_piped_output_is_not_wrapped_at_80_columns(tmp_path):
    env = child_env()
    env.pop("COLUMNS", None)
    result = run_bounded([PYTHON, "-m", "hangdoctor", "analyze", str(DATA / "gloo8_mixed.node.json")], timeout=60,
                         env=env, cwd=REPO)
    headline = next(line for line in result.stdout.splitlines() if "HUNG:" in line)
    assert "(7/8 responded)" in headline, headline  # one line, as it would be in a wide terminal
