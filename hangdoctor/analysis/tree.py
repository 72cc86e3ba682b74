"""The merged prefix tree of stacks (as STAT draws it): one node per frame path, the rank set on every edge.

Built from the distinct stacks only (ranks that share an interned stack are grouped first), so 16,384
ranks in a handful of places cost a handful of insertions. Ranks that did not respond and have no stack
hang under a pseudo node named after their status.

With every thread (`--all-threads`) a rank has several stacks: each one starts (outermost) with a marker frame
naming its thread, `thread MainThread`, `thread watchdog`, so a rank's threads go to separate subtrees, and the
same thread of every rank merges as the main threads do.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hangdoctor.model import Frame, Stack


@dataclass
class TreeNode:
    frame: Frame | None  # None for the root and for "did not respond" pseudo nodes
    ranks: list[int] = field(default_factory=list)  # sorted: every rank whose stack passes through here
    children: list["TreeNode"] = field(default_factory=list)  # ordered by their smallest rank
    ends: list[int] = field(default_factory=list)  # ranks whose innermost frame is this one
    note: str = ""  # pseudo nodes: e.g. "did not respond: stopped"

    @property
    def label(self) -> str:
        if self.frame is not None:
            return self.frame.label()
        return self.note or "all ranks"

    def walk(self):
        """Every node, depth first, without recursion."""
        todo = [self]
        while todo:
            node = todo.pop()
            yield node
            todo.extend(reversed(node.children))


@dataclass
class _Building:
    frame: Frame | None
    ranks: list[int] = field(default_factory=list)
    children: dict = field(default_factory=dict)
    ends: list[int] = field(default_factory=list)
    note: str = ""


def thread_frame(name: str) -> Frame:
    """The marker frame a thread's stack starts with in an all-threads tree (no file: labelled by its name)."""
    return Frame(f"thread {name or '(unnamed)'}", "")


def build_tree(stacks: dict[int, Stack], silent: dict[str, list[int]] | None = None, *,
               others: list[tuple[int, Stack]] = ()) -> TreeNode:
    """stacks: rank -> stack (innermost first), where the rank ends (its class); silent: status -> ranks without
    any stack; others: more (rank, stack) pairs that pass through the tree without ending a rank there (the
    other threads, with --all-threads). A rank is counted once per node, however many of its stacks pass."""
    root = _Building(None)
    for pairs, ending in ((stacks.items(), True), (others, False)):
        by_stack: dict[int, tuple[Stack, list[int]]] = {}
        for rank, stack in pairs:
            entry = by_stack.get(id(stack))
            if entry is None:
                by_stack[id(stack)] = (stack, [rank])
            else:
                entry[1].append(rank)
        for stack, ranks in by_stack.values():
            node = root
            node.ranks.extend(ranks)
            for frame in reversed(stack):
                child = node.children.get(frame)
                if child is None:
                    child = node.children[frame] = _Building(frame)
                child.ranks.extend(ranks)
                node = child
            if ending:
                node.ends.extend(ranks)
    for status, ranks in (silent or {}).items():
        if ranks:
            key = ("silent", status)
            root.children[key] = _Building(None, list(ranks), {}, list(ranks), f"did not respond: {status}")
            root.ranks.extend(ranks)
    return _finish(root, dedupe=bool(others))


def _finish(root: _Building, *, dedupe: bool = False) -> TreeNode:
    """Freeze the tree without recursion: real stacks can be thousands of frames deep."""
    done: dict[int, TreeNode] = {}
    todo: list[tuple[_Building, bool]] = [(root, False)]
    while todo:
        node, expanded = todo.pop()
        if not expanded:
            todo.append((node, True))
            todo.extend((child, False) for child in node.children.values())
            continue
        children = [done.pop(id(child)) for child in node.children.values()]
        children.sort(key=lambda c: c.ranks[0] if c.ranks else -1)
        ranks, ends = (set(node.ranks), set(node.ends)) if dedupe else (node.ranks, node.ends)
        done[id(node)] = TreeNode(frame=node.frame, ranks=sorted(ranks), children=children, ends=sorted(ends),
                                  note=node.note)
    return done[id(root)]


def chains(node: TreeNode) -> list[TreeNode]:
    """The node and its single-child descendants with the same rank set: one box in the pictures."""
    chain = [node]
    while len(chain[-1].children) == 1 and not chain[-1].ends and len(chain[-1].children[0].ranks) == len(node.ranks) \
            and chain[-1].children[0].frame is not None:
        chain.append(chain[-1].children[0])
    return chain
