"""weightdiff: exact per-rank weight dumps, and the diffs and checks that find desyncs and misgrouped parameters.

    weightdiff.dump(model, iteration=..., tag="before"|"after", out=..., coords=..., param_groups=...)
    weightdiff.param_groups_by_name(model, torch_optimizer)   # before deepspeed.initialize
    weightdiff a/ b/        weightdiff check DIR              # the CLI (weightdiff.cli.main)

The dump side imports torch when first used (`weightdiff.dump` is resolved lazily), so the CLI and the
readers of dumps and safetensors run without it. Must not import `trainer`.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["MODES", "dump", "param_groups_by_name"]


class _Package(types.ModuleType):
    """`weightdiff.dump` is the function even after the submodule of the same name is imported (the import
    system then sets the package attribute to the submodule: the setter ignores that)."""

    @property
    def dump(self) -> Any:
        from weightdiff.dump import dump

        return dump

    @dump.setter
    def dump(self, value: Any) -> None:
        pass


def __getattr__(name: str) -> Any:
    if name == "MODES":
        from weightdiff.dump import MODES

        return MODES
    if name == "param_groups_by_name":
        from weightdiff.introspect import param_groups_by_name

        return param_groups_by_name
    raise AttributeError(f"module 'weightdiff' has no attribute {name!r}")


sys.modules[__name__].__class__ = _Package
