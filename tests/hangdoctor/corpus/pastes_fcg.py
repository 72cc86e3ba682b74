"""The `ray stack` paste form of the fcg_ray_train_lightning_report_ckpt shape: `python -m
tests.hangdoctor.corpus.pastes_fcg` writes <case>/paste_raystack/trace.out from the case's recorded native dump.

`ray stack` (ray/scripts/scripts.py) runs, on a node, `py-spy dump --pid P --native` for every process whose
`ps aux` line matches ` ray::` or `default_worker.py` (the driver is not one of them), each dump behind a line
`Stack dump for <its ps aux line>` and followed by a blank line. The ps lines are made up (fixed numbers), the
dumps are the recorded ones, in pid order. Deterministic.
"""

from __future__ import annotations

import re
from pathlib import Path

CORPUS = Path(__file__).parent
CASE = "fcg_ray_train_lightning_report_ckpt"


def split_processes(text: str) -> list[tuple[int, str, list[str]]]:
    blocks, current = [], None
    for line in text.splitlines():
        match = re.match(r"Process (\d+): (.*)", line)
        if match:
            current = (int(match.group(1)), match.group(2), [line])
            blocks.append(current)
        elif current is not None:
            current[2].append(line)
    return blocks


def ray_stack(native: str) -> str:
    out = []
    for index, (pid, title, lines) in enumerate(split_processes(native)):
        if "ray::" not in title and "default_worker.py" not in title:
            continue
        ps = f"ray       {pid:>6}  {1.2 + index:.1f}  0.{index + 3}  {8473612 + 4096 * index} {1187520 + 512 * index} ?" \
             f"     Sl   14:0{index}   0:{41 + index:02d} {title}"
        out.append(f"Stack dump for {ps}")
        while lines and not lines[-1].strip():
            lines = lines[:-1]
        out.extend(lines)
        out.append("")
    return "\n".join(out) + "\n"


def main() -> int:
    case = CORPUS / CASE
    target = case / "paste_raystack"
    target.mkdir(exist_ok=True)
    (target / "trace.out").write_text(ray_stack((case / "native" / "trace-node1.out").read_text()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
