"""The HTML/SVG report in a real browser (Debian's chromium, headless; `make test` installs it): on a recorded
hang of 8 gloo ranks (tests/hangdoctor/data/gloo8_mixed.node.json: rank 2 SIGSTOPped, rank 7 a straggler still
computing, ranks 4-6 in another call than 0-1,3), the ranks the verdict blames are drawn in the suspect colour,
the low-confidence ones in theirs, the waiting ranks in blue, and the legend is on the page.

The screenshot is of the SVG alone on a page without margins, so that the SVG's coordinates are the pixels';
the whole report is loaded too, and its DOM as the browser built it is checked."""

import re
import shutil
from pathlib import Path

import pytest

from hangdoctor.analysis.verdict import diagnose
from hangdoctor.formats.load import load_paths
from hangdoctor.identity import TopologyFlags
from hangdoctor.render.html import render_html, render_svg
from hangdoctor.render.roles import ROLES
from tests.support import run_bounded

DATA = Path(__file__).parent / "data"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(*args: str, timeout: float = 90):
    assert CHROMIUM, "chromium is missing: `make test` installs it (scripts/system-packages.sh)"
    return run_bounded([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        "--force-device-scale-factor=1", "--hide-scrollbars", *args], timeout=timeout)


@pytest.fixture(scope="module")
def verdict():
    return diagnose(load_paths([DATA / "gloo8_mixed.node.json"], TopologyFlags(tp=2, pp=2)))


def pixel(png: Path, x: float, y: float) -> str:
    import matplotlib.image

    rgba = matplotlib.image.imread(str(png))
    r, g, b = (round(float(v) * 255) for v in rgba[int(y), int(x)][:3])
    return f"#{r:02x}{g:02x}{b:02x}"


def boxes(svg: str) -> list[tuple[str, float, float]]:
    """(title text, x, y) of each box, as the SVG places it."""
    found = []
    for title, x, y in re.findall(r'<g><title>(.*?)</title><rect x="(\d+)" y="(\d+)"', svg, re.S):
        found.append((title, float(x), float(y)))
    return found


def test_suspects_are_drawn_in_the_suspect_colour_with_the_legend(verdict, tmp_path):
    sure = {tuple(s.ranks) for s in verdict.suspects if s.confidence != "low"}
    unsure = {tuple(s.ranks) for s in verdict.suspects if s.confidence == "low"}
    assert sure == {(7,), (2,)} and unsure == {(4, 5, 6)}, verdict.suspects
    svg = render_svg(verdict)
    width, height = re.search(r'width="(\d+)" height="(\d+)"', svg).groups()
    page = tmp_path / "tree.html"
    page.write_text(f'<!DOCTYPE html><html><body style="margin:0">{svg}</body></html>')
    shot = tmp_path / "tree.png"
    result = chromium(f"--window-size={width},{height}", f"--screenshot={shot}", page.as_uri())
    assert shot.exists(), result.output[-2000:]
    drawn = {title.split("\n", 1)[0]: pixel(shot, x + 8, y + 4) for title, x, y in boxes(svg)}
    assert pixel(shot, 14, 14) == ROLES["suspect"][0], "the legend's first swatch"
    assert drawn["[1] 7"] == drawn["[1] 2"] == ROLES["suspect"][0], drawn  # the straggler, the stopped rank
    assert drawn["[3] 4-6"] == ROLES["possible"][0], drawn
    assert drawn["[3] 0-1,3"] == ROLES["waiting"][0], drawn


def test_the_whole_report_loads_with_its_legend_and_tables(verdict, tmp_path):
    report = tmp_path / "report.html"
    report.write_text(render_html(verdict))
    dom = chromium("--dump-dom", report.as_uri()).stdout
    assert '<g class="legend">' in dom and "suspect: the verdict blames these ranks" in dom
    assert dom.count('<table class="ranks">') == len(verdict.classes)
    assert "innermost frame first" in dom and "_aggregate_total_loss" in dom
