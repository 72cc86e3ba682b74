"""JSON output: the analysis results as plain data, with the same fields the human views print."""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass

from hangdoctor.clicore.jsondoc import document
from tracing.records import CodeLocation, Event, OpenFrame


def jsonable(obj):
    if isinstance(obj, CodeLocation):
        return {"name": obj.name, "module": obj.module, "qualname": obj.qualname, "file": obj.filename,
                "line": obj.lineno, "where": obj.where, "is_c": obj.is_c}
    if isinstance(obj, OpenFrame):  # the function, with "line" the line it is at (see records.OpenFrame)
        return dict(jsonable(obj.loc), line=obj.line, line_source=obj.line_source, def_line=obj.loc.lineno,
                    where=obj.where)
    if isinstance(obj, Event):
        return {"seq": obj.seq, "thread": obj.thread, "thread_seq": obj.thread_seq, "wall_ns": obj.wall_ns,
                "kind": obj.word, "depth": obj.depth, "function": jsonable(obj.loc)}
    if is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    return obj


def dumps(kind: str, report) -> str:
    """The report as a JSON document of format `kind` (clicore.jsondoc: "format" and "version" first)."""
    return json.dumps(document(kind, jsonable(report)), indent=2)
