"""The envelope of every `--json` document: a `format` key naming what it is, and the tool's version.

    document("weightdiff-diff/1", report_fields)  ->  {"format": "weightdiff-diff/1", "version": "0.1.0", ...}

A reader checks `format` before anything else; the number after the slash changes when a field changes meaning.
"""

from __future__ import annotations

from collections.abc import Mapping

from hangdoctor.clicore import __version__


def document(kind: str, payload: Mapping) -> dict:
    """`payload`'s keys after "format" and "version" (which it must not hold itself)."""
    if "/" not in kind:
        raise ValueError(f"format {kind!r} has no version: use NAME/N")
    clash = {"format", "version"} & set(payload)
    if clash:
        raise ValueError(f"payload already holds {', '.join(sorted(clash))}")
    return {"format": kind, "version": __version__, **payload}
