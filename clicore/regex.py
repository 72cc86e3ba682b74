"""A user's regular expression, compiled only when its matching time is bounded by the text's length.

Python's `re` backtracks: `(a+)+$` against forty `a`s and a `b` takes longer than the universe, and a watch whose
`--iteration-regex` is that pattern stops watching at the first such log line. The shape behind nearly every
such pattern is a repeat inside a repeat whose inner part can match more than one way (`(a+)+`, `(a*)*`,
`(\\w+\\s?)+`). A pattern holding a repeat of at most one character-width step inside another unbounded repeat
is refused, with the part named; rewriting it (`a+` for `(a+)+`) matches the same lines.

Standard library only.
"""

from __future__ import annotations

import re

try:  # Python 3.11 and later
    from re import _parser as _sre_parse
except ImportError:  # Python 3.10
    import sre_parse as _sre_parse

_REPEATS = {_sre_parse.MAX_REPEAT, _sre_parse.MIN_REPEAT} | (
    {_sre_parse.POSSESSIVE_REPEAT} if hasattr(_sre_parse, "POSSESSIVE_REPEAT") else set())
_UNBOUNDED = _sre_parse.MAXREPEAT


def _children(op, av) -> list:
    """The sub-patterns of one parsed item."""
    if op in _REPEATS:
        return [av[2]]
    if op == _sre_parse.SUBPATTERN:
        return [av[-1]]
    if op == _sre_parse.BRANCH:
        return list(av[1])
    if op in (_sre_parse.ASSERT, _sre_parse.ASSERT_NOT):
        return [av[1]]
    if op == getattr(_sre_parse, "ATOMIC_GROUP", None):
        return [av]
    if op == _sre_parse.GROUPREF_EXISTS:
        return [p for p in av[1:] if p is not None]
    return []


def _repeats(pattern) -> bool:
    """Whether the parsed pattern holds a repeat that can match more than once."""
    for op, av in pattern:
        if op in _REPEATS and av[1] > 1:
            return True
        if any(_repeats(child) for child in _children(op, av)):
            return True
    return False


def _nested(pattern) -> bool:
    for op, av in pattern:
        if op in _REPEATS and av[1] == _UNBOUNDED and op != getattr(_sre_parse, "POSSESSIVE_REPEAT", None) \
                and _repeats(av[2]):
            return True
        if any(_nested(child) for child in _children(op, av)):
            return True
    return False


def compile_user_regex(text: str, where: str) -> re.Pattern:
    """re.compile(text), or ValueError with one line naming `where` (a flag or a file's field)."""
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise ValueError(f"{where} {text!r} is not a regular expression: {exc}") from None
    except (RecursionError, OverflowError):
        raise ValueError(f"{where} {text!r} is too complex to compile") from None
    if _nested(_sre_parse.parse(text)):
        raise ValueError(f"{where} {text!r} repeats a repeat (like (a+)+): its matching time can grow "
                         "exponentially with the line; write the inner repeat once (a+)")
    return pattern
