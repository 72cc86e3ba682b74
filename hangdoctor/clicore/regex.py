"""A user's regular expression, compiled only when its matching time is bounded by the text's length.

Python's `re` backtracks: `(a+)+$` against forty `a`s and a `b` takes longer than the universe, and a watch whose
`--iteration-regex` is that pattern stops watching at the first such log line. The shape behind nearly every
such pattern is a repeat inside a repeat whose inner part can match more than one way (`(a+)+`, `(a*)*`,
`(\\w+\\s?)+`), or a round that can end in two ways (`(a|aa)+`, `(a|a)*`). Such a pattern is refused: a
repeat inside an unbounded repeat or one of more than SMALL_COUNT rounds (`(.*a){20}`), and an unbounded repeat
whose rounds are ambiguous. Rewriting it (`a+` for `(a+)+`) matches the same lines.

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


SMALL_COUNT = 4  # (\d+\.){3}: a repeat inside at most 4 rounds grows polynomially, and slowly: allowed


def _first(pattern) -> frozenset | None:
    """The characters a parsed pattern can start with, or None when that is not known (any character, a class)."""
    for op, av in pattern:
        if op == _sre_parse.LITERAL:
            return frozenset([av])
        if op == _sre_parse.SUBPATTERN:
            return _first(av[-1])
        if op in _REPEATS:
            return _first(av[2]) if av[0] > 0 else None
        if op in (_sre_parse.AT,):
            continue
        return None
    return frozenset()


def _meets(a: frozenset | None, b: frozenset | None) -> bool:
    return a is None or b is None or bool(a & b)


def _ambiguous(body) -> bool:
    """Whether one round of an unbounded repeat over `body` can end in two ways before the next round starts
    alike: alternatives that start alike or two empty ones ((a|a)*, sre parses it as a then (|)), or an optional
    or variable part that can start as a round starts ((a|aa)+, which is a then (|a); (aa?)+)."""
    head = _first(body)
    for op, av in _flat(body):
        if op == _sre_parse.BRANCH:
            empty = [b for b in av[1] if not b]
            firsts = [_first(b) for b in av[1] if b]
            if len(empty) > 1 or (empty and any(_meets(f, head) for f in firsts)):
                return True
            if any(_meets(f, g) for i, f in enumerate(firsts) for g in firsts[i + 1:]):
                return True
        elif op in _REPEATS and av[0] < av[1] and _meets(_first(av[2]), head):
            return True
    return False


def _dangerous(op, av) -> bool:
    """A repeat whose rounds can split the text in exponentially many ways: a repeat inside it (unless the outer
    count is small), or, unbounded, a body whose rounds are ambiguous."""
    if op not in _REPEATS or op == getattr(_sre_parse, "POSSESSIVE_REPEAT", None) or av[1] < 2:
        return False
    body = av[2]
    if (av[1] == _UNBOUNDED or av[1] > SMALL_COUNT) and _repeats(body):
        return True
    return av[1] == _UNBOUNDED and _ambiguous(body)


def _flat(pattern):
    """Items of a pattern, through groups but not into repeats."""
    for op, av in pattern:
        yield op, av
        if op == _sre_parse.SUBPATTERN:
            yield from _flat(av[-1])


def _nested(pattern) -> bool:
    for op, av in pattern:
        if _dangerous(op, av):
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
        raise ValueError(f"{where} {text!r} repeats a repeat or alternatives that start alike (like (a+)+ or "
                         "(a|aa)*): its matching time can grow exponentially with the line; write the inner repeat "
                         "once (a+), and alternatives that start differently")
    return pattern
