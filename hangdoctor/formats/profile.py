"""A rank's time profile in a node file (`attach --profile`: collector/profile.py) -> RankProfile.

The collector stores each distinct frame once per node (`profile_frames`, as py-spy's raw format prints it:
"name (file:line)") and each rank's stacks as [thread id, thread name, [frame index, ... outermost first],
count]; its child processes' (DataLoader workers) as `children`: [{"pid", "stacks"}], and `rate_note`, what the
samplers cost on the node, and `cpu`, what the kernel counted of the rank's time on a core over the window:
{"seconds", "on_core", "waiting", "all_on_core"} (each absent in files of older collectors). Anything else is damage: ValueError, and the node file is refused with the reason.
"""

from __future__ import annotations

from hangdoctor.formats import frames as interned
from hangdoctor.model import OK, ChildProfile, CpuTime, Frame, ProfiledStack, RankProfile


def frame_from_label(label: str) -> Frame:
    """"step (train.py:42)" -> Frame("step", "train.py", 42); a label without a place is a name alone."""
    name, sep, place = label.rpartition(" (")
    if not sep or not place.endswith(")"):
        return interned.frame(label, "", 0, False)
    file, colon, line = place[:-1].rpartition(":")
    if not colon or not line.isdigit():
        file, line = place[:-1], "0"
    return interned.frame(name, file, int(line), int(line) == 0 and interned.looks_native(file))


def frames_of_profiles(raw: object) -> list[Frame]:
    if not isinstance(raw, list) or not all(isinstance(label, str) for label in raw):
        raise ValueError("profile_frames is not a list of frame labels")
    return [frame_from_label(label) for label in raw]


def read_profile(raw: object, table: list[Frame], pid: int) -> RankProfile:
    if not isinstance(raw, dict):
        raise ValueError(f"profile of pid {pid} is not an object")
    status, error = raw.get("status"), raw.get("error") or ""
    rate, seconds, samples = raw.get("rate") or 0, raw.get("seconds") or 0.0, raw.get("samples") or 0
    if not isinstance(status, str) or not isinstance(error, str) or type(rate) is not int \
            or type(samples) is not int or type(seconds) not in (int, float) or min(rate, samples, seconds) < 0:
        raise ValueError(f"profile of pid {pid}: bad status, rate, seconds or samples")
    stacks = _stacks(raw.get("stacks") or [], table, pid)
    rate_note = raw.get("rate_note") or ""
    if not isinstance(rate_note, str):
        raise ValueError(f"profile of pid {pid}: rate_note is not text")
    children = raw.get("children") or []
    if not isinstance(children, list) or not all(isinstance(c, dict) and type(c.get("pid")) is int
                                                 and isinstance(c.get("stacks"), list) for c in children):
        raise ValueError(f"profile of pid {pid}: children is not a list of {{pid, stacks}}")
    return RankProfile(status=status if stacks or status != OK else "error", error=error, rate=rate,
                       seconds=float(seconds), samples=samples, stacks=stacks,
                       children=tuple(ChildProfile(c["pid"], _stacks(c["stacks"], table, pid)) for c in children),
                       rate_note=rate_note, cpu=_cpu(raw.get("cpu"), pid))


CPU_FIELDS = ("seconds", "on_core", "waiting", "all_on_core")


def _cpu(raw: object, pid: int) -> CpuTime | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not all(type(raw.get(k)) in (int, float) and raw[k] >= 0 for k in CPU_FIELDS) \
            or raw["seconds"] <= 0:
        raise ValueError(f"profile of pid {pid}: cpu is not {{{', '.join(CPU_FIELDS)}}} of seconds")
    return CpuTime(*(float(raw[k]) for k in CPU_FIELDS))


def _stacks(raw: list, table: list[Frame], pid: int) -> tuple[ProfiledStack, ...]:
    stacks = []
    for item in raw:
        if not (isinstance(item, list) and len(item) == 4 and type(item[0]) is int and isinstance(item[1], str)
                and isinstance(item[2], list) and type(item[3]) is int and item[3] > 0):
            raise ValueError(f"profile of pid {pid}: a stack is not [thread id, name, frames, count]")
        try:
            frames = interned.stack([table[i] for i in reversed(item[2])])  # innermost first, like every Stack
        except (IndexError, TypeError):
            raise ValueError(f"profile of pid {pid}: a frame index outside profile_frames") from None
        stacks.append(ProfiledStack(item[0], item[1], frames, item[3]))
    return tuple(stacks)
