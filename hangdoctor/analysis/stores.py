"""Which rendezvous store each rank in one is trying to reach, and its part there: ranks in the c10d store wait in
one call by their frames (`init_process_group`), yet ranks told different addresses (MASTER_ADDR:MASTER_PORT in
each rank's environment, or the address in the locals of torch's store set-up) wait in different stores, and with
native frames a rank still connecting (`TCPClient::connect`, retrying) is told apart from the rank that hosts the
store and waits for its workers (`TCPStore::waitForWorkers`). The places (places.py) and the wait-for graph
(waitgraph.py `_store_edges`) read them."""

from __future__ import annotations

from dataclasses import dataclass

from hangdoctor.analysis.ranks import RankView

CONNECTING, HOSTING = "connecting", "hosting"
ROLE_WORDS = {CONNECTING: "connecting to its store, retrying", HOSTING: "hosting the store, waiting for its workers"}
_CONNECT_FRAMES = ("TCPClient::connect", "detail::Socket::connect", "SocketConnectOp")
_HOST_FRAMES = ("TCPStore::waitForWorkers",)


@dataclass(frozen=True)
class StoreKey:
    """What sets a rank in the store apart from the others in it: the address it was told, or its part."""

    endpoint: str | None = None
    role: str = ""

    def words(self) -> str:
        return f"its store at {self.endpoint}" if self.endpoint else ROLE_WORDS.get(self.role, "")


def store_role(view: RankView) -> str:
    """CONNECTING, HOSTING or "", from the native frames of its stack (py-spy --native)."""
    names = [f.name for f in view.stack if f.native]
    if any(part in name for name in names for part in _CONNECT_FRAMES):
        return CONNECTING
    if any(part in name for name in names for part in _HOST_FRAMES):
        return HOSTING
    return ""


def store_keys(views: list[RankView]) -> dict[int, StoreKey]:
    """rank -> its StoreKey, for the ranks that answered and wait in the store, where something sets some apart:
    the addresses told, where they differ between the ranks that answered (a rank whose address is unknown gets
    none), else a host waiting for its workers beside ranks still connecting. Empty where nothing does."""
    waiting = [v for v in views if v.responded and v.wait is not None and v.wait.kind == "store"]
    told = {v.identity.endpoint for v in views if v.responded and v.identity.endpoint}
    if len(told) > 1:
        return {v.rank: StoreKey(endpoint=v.identity.endpoint) for v in waiting if v.identity.endpoint}
    roles = {v.rank: store_role(v) for v in waiting}
    if CONNECTING in roles.values() and HOSTING in roles.values():
        return {rank: StoreKey(role=role) for rank, role in roles.items() if role}
    return {}
