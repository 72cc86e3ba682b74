"""`--json`: the report dataclass as JSON, field for field what the terminal view shows (and the per-pair detail).

Non-finite floats become the strings "inf", "-inf", "nan", so the output is strict JSON that jq can read.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from hangdoctor.clicore.jsondoc import document


def plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in ("has_differences", "n_differences", "exact"):
            if hasattr(type(value), name) and isinstance(getattr(type(value), name), property):
                data[name] = plain(getattr(value, name))
        return data
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, Path):
        return str(value)
    return value


def to_json(kind: str, report: Any) -> str:
    """The report as a JSON document of format `kind`, e.g. "weightdiff-diff/1" (clicore.jsondoc)."""
    return json.dumps(document(kind, plain(report)), indent=1, allow_nan=False)
