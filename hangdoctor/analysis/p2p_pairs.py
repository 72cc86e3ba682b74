"""Point-to-point calls paired across ranks from the Flight Recorder: who never posted the send (or the recv) that
its peer waits for.

NCCL and gloo pair a sender's k-th send to a peer with that peer's k-th recv from it. So, per process group and
ordered pair of members (a sends to b), a's count of sends to b and b's count of receives from a must agree; where
b has posted more receives than a sends, b waits for a send that a never posted: a is the one behind (it skipped
a send, or has not reached it). The other way round, a waits for a recv that b never posted. Pipelines hang like
this with no rank blocked where the mistake is (NCCL's send and recv return at once; the hosts wait later, at a
synchronisation), and the collectives' sequences show nothing: every rank issued the same ones.

A late rank that posted nothing at all to or from that peer (no history between the two) is only one reading:
the other is that the poster named the wrong peer (a halo's neighbour computed with a wrap-around); both are
then named, low (`history`).

Counted only where both ranks' buffers hold every point-to-point op of the group since its first
(formats/flight_recorder.py: `p2p_counts`); the peers in torch's names (`send 0->1`, `recv 1<-0`) are group ranks,
placed with the group's members where torch lists them (the default group: global ranks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hangdoctor.formats.flight_recorder import FrDump

_NAME = re.compile(r"^(send|recv) (\d+)(->|<-)(\d+)$")


@dataclass(frozen=True)
class P2pGap:
    group: str
    sender: int  # global ranks
    receiver: int
    sends: int  # the sender's sends to the receiver
    recvs: int  # the receiver's receives from the sender
    history: bool = True  # the late rank posted some op (either way) with its peer in this group

    @property
    def poster(self) -> int:
        """The rank whose posted op waits."""
        return self.receiver if self.late == self.sender else self.sender

    @property
    def late(self) -> int:
        """The rank that did not post its side."""
        return self.sender if self.recvs > self.sends else self.receiver

    @property
    def sentence(self) -> str:
        if self.recvs > self.sends:
            text = (f"never posted send #{self.sends + 1} to rank {self.receiver}, whose recv #{self.recvs} from it "
                    f"waits (group {self.group}: {self.sends} sends against {self.recvs} receives, Flight Recorder)")
        else:
            text = (f"never posted recv #{self.recvs + 1} from rank {self.sender}, whose send #{self.sends} to it waits "
                    f"(group {self.group}: {self.sends} sends against {self.recvs} receives, Flight Recorder)")
        return text

    @property
    def doubt(self) -> str:
        """The other reading, where the late rank has no history with its peer; "" where it has."""
        if self.history:
            return ""
        return (f"it posted nothing at all to or from rank {self.poster} in group {self.group}: it skipped the "
                f"exchange, or rank {self.poster} named a peer that is not its partner (a neighbour computed wrong, "
                f"a wrap-around): the recorder cannot tell which")


@dataclass(frozen=True)
class Crossed:
    """One exchange posted on two communicators: the sender's sends to the receiver in one process group have no
    receive there, and the receiver's receives from the sender in another group have no send there (a send left
    on the default group while the pipeline receives on its own: Megatron-LM#620)."""
    sender: int
    receiver: int
    send_group: str
    recv_group: str
    off: list[int]  # the side whose group the job's other point-to-point calls do not use; both when no side is

    @property
    def sentence(self) -> str:
        said = (f"rank {self.sender} sends to rank {self.receiver} in group {self.send_group}, and rank "
                f"{self.receiver} receives from rank {self.sender} in group {self.recv_group} (Flight Recorder): the "
                f"two sides of one exchange are on two communicators, which never match")
        if len(self.off) == 1:
            group = self.send_group if self.off == [self.sender] else self.recv_group
            said += f"; the job's other point-to-point calls use the other group, not group {group}"
        return said


def pair_p2p(dumps: list[FrDump]) -> tuple[list[P2pGap], list[Crossed]]:
    """(the gaps, the exchanges on two communicators) of the dumps' point-to-point counts, counted once."""
    counts = _counts(dumps)
    return _gaps(counts), _crossed(counts)


def _crossed(counts: dict) -> list[Crossed]:
    """Exchanges whose send and receive were posted in two different process groups."""
    users: dict[str, set[int]] = {}  # group -> the ranks that posted point-to-point calls in it
    groups_of: dict[int, list[str]] = {}  # rank -> the groups whose counts it has
    for (group, rank), ops in sorted(counts.items()):
        groups_of.setdefault(rank, []).append(group)
        if ops:
            users.setdefault(group, set()).add(rank)
    found = []
    for (group, rank), ops in sorted(counts.items()):
        for (kind, peer), n in sorted(ops.items()):
            if kind != "send" or counts.get((group, peer), {}).get(("recv", rank), 0) >= n:
                continue
            for other in groups_of.get(peer, []):
                if other == group:
                    continue
                if counts[(other, peer)].get(("recv", rank), 0) > counts.get((other, rank), {}).get(("send", peer), 0):
                    mine, their = len(users.get(group, ())), len(users.get(other, ()))
                    off = [rank] if mine < their else [peer] if their < mine else sorted({rank, peer})
                    found.append(Crossed(rank, peer, group, other, off))
    return found


def _counts(dumps: list[FrDump]) -> dict[tuple[str, int], dict[tuple[str, int], int]]:
    """(group, global rank) -> (kind, global peer) -> n, for every group whose buffer holds all its p2p calls."""
    counts: dict[tuple[str, int], dict[tuple[str, int], int]] = {}
    for dump in dumps:
        for group, ops in dump.p2p_counts.items():
            members = dump.group_ranks.get(group)
            mine = counts.setdefault((group, dump.rank), {})
            for name, n in ops.items():
                match = _NAME.match(name)
                if match is None:
                    continue
                peer = int(match[4])
                if members:
                    if peer >= len(members):
                        continue
                    peer = members[peer]
                mine[(match[1], peer)] = mine.get((match[1], peer), 0) + n
    return counts


def _gaps(counts: dict) -> list[P2pGap]:
    """Every ordered pair whose sends and receives disagree, where both sides' counts are complete."""
    def talked(group: str, rank: int, peer: int) -> bool:
        mine = counts.get((group, rank), {})
        return bool(mine.get(("send", peer)) or mine.get(("recv", peer)))

    gaps = []
    for (group, rank), ops in sorted(counts.items()):
        for (kind, peer), n in sorted(ops.items()):
            if kind != "send" or (group, peer) not in counts:
                continue
            recvs = counts[(group, peer)].get(("recv", rank), 0)
            if recvs != n:
                late = rank if recvs > n else peer
                gaps.append(P2pGap(group, rank, peer, n, recvs, talked(group, late, peer if late == rank else rank)))
        for (kind, peer), n in sorted(ops.items()):  # receives from a rank that never sent at all
            if kind == "recv" and (group, peer) in counts and ("send", rank) not in counts[(group, peer)]:
                gaps.append(P2pGap(group, peer, rank, 0, n, talked(group, peer, rank)))
    return gaps
