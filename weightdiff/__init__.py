"""weightdiff: exact per-rank weight dumps, and the diffs and checks that find desyncs and misgrouped parameters.

    weightdiff.dump(model, iteration=..., tag="before"|"after", out=..., coords=..., param_groups=...)
    weightdiff.param_groups_by_name(model, torch_optimizer)   # before deepspeed.initialize
    weightdiff a/ b/        weightdiff check DIR              # the CLI (weightdiff.cli.main)

Imports torch; must not import `trainer`.
"""

from weightdiff.dump import MODES, dump
from weightdiff.introspect import param_groups_by_name

__all__ = ["MODES", "dump", "param_groups_by_name"]
