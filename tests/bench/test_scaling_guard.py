"""The scaling guard itself (bench/scaling.py): a quadratic stage fails it, a linear one passes; ratios measured
side by side in one run, never an absolute time."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from scaling import LIMIT, ratio, verdict_line  # noqa: E402


def quadratic(n):
    items = list(range(n))
    return lambda: sum(1 for a in items for b in items[:a] if b == -1)  # n^2 / 2 comparisons


def linear(n):
    items = list(range(n))
    return lambda: sum(1 for a in items if a == -1)


def test_a_quadratic_stage_fails_the_guard_and_a_linear_one_passes():
    slow = ratio("quadratic", quadratic(800), quadratic(3200), repeats=3, min_seconds=0.02)  # over the floor
    fast = ratio("linear", linear(20000), linear(80000), repeats=3, min_seconds=0.02)
    assert slow.value > LIMIT and not slow.ok  # about 16x
    assert fast.ok and fast.calls >= 1
    code, line = verdict_line([slow, fast])
    assert code == 1 and line == f"scaling guard: NOT LINEAR: quadratic {slow.value:.1f}x"
    assert verdict_line([fast])[0] == 0


def test_a_stage_under_the_floor_is_reported_not_judged():
    from scaling import FLOOR_S, Ratio
    tiny = Ratio("tiny", 0.0007, 0.0050, 1)  # 7x, but 5 ms at 4x the input: the caches' and the scheduler's noise
    assert tiny.value > LIMIT and not tiny.judged and tiny.ok
    assert FLOOR_S > 0.005
    code, line = verdict_line([tiny])
    assert code == 0 and "1 under" in line
