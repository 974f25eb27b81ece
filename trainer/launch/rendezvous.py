"""The rendezvous of a torchrun or srun world in its store, kept in Python so that no rank waits blind in
C++ (a signal ends the wait): every rank counts itself in and polls until the world is there. A rank that
refuses the run before joining leaves its error there (`tell_peers`): the waiting ranks end at once,
naming it. Once joined, a rank whose collective failed leaves a note and names, from the others', the
rank that failed first or the ranks that left none: lost with their node (`blame`). The store is
torchrun's agent's (TORCHELASTIC_USE_AGENT_STORE), else (srun) one that rank 0 serves."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import time
from datetime import timedelta

import torch.distributed as dist

from gtool.errors import GtoolError
from gtool.trainer.launch.environment import RankEnv, environment_rank
from gtool.trainer.launch.failures import RankFailed, ranks_text
from gtool.trainer.launch.peers import gone_peers, running_peers

POLL_SECONDS = 0.1
CONNECT_SECONDS = 5.0
"""How long one attempt to reach the store lasts (a signal is handled between attempts)."""
TOLD_SECONDS = 30.0
"""How long a rank that refused waits for a waiting rank to read why, before it ends (the store may be
its node's: torchrun's agent on the --master-addr node, or srun's rank 0)."""
NOTES_SECONDS = 5.0
"""How long a rank whose collective failed waits for the others' notes before it names the lost ones."""
PEER_TROUBLE = re.compile(
    r"gloo/transport|Connection (?:reset|closed|refused)|Broken pipe|NCCL|Socket Timeout|timed out", re.I
)
"""What a collective's error says when the trouble is a peer's (gone, unreachable), not this rank's."""

_store: dist.Store | None = None
"""The rendezvous store, once this rank is joined."""
_joining = False
"""Whether this rank went to the rendezvous (a refusal after that is not told: the others see it)."""


def _prefix() -> str:
    """The keys of this attempt of the launch (torchrun restarts its workers under the same store)."""
    return f"gtool/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/"


def _agent_store() -> bool:
    return os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"


def _connect(env: RankEnv, timeout: timedelta) -> dist.TCPStore:
    """This rank's connection to the rendezvous store, tried again every CONNECT_SECONDS until `timeout`
    (rank 0 of srun serves it). torchrun's agent serves it before any rank starts: not reaching it means
    that the node of --master-addr ended its launch."""
    where = f"{env.master_addr}:{env.master_port}"
    if env.rank == 0 and not _agent_store():
        store = dist.TCPStore(
            env.master_addr, env.master_port, env.world_size, True, timeout, wait_for_workers=False
        )
        return store
    deadline = time.monotonic() + timeout.total_seconds()
    while True:
        try:
            attempt = timedelta(seconds=min(CONNECT_SECONDS, timeout.total_seconds()))
            store = dist.TCPStore(env.master_addr, env.master_port, env.world_size, False, attempt)
            store.set_timeout(timeout)
            return store
        except RuntimeError as error:
            if _agent_store() or time.monotonic() > deadline:
                host = "the --master-addr node's torchrun" if _agent_store() else "rank 0"
                raise GtoolError(
                    f"the rendezvous at {where} ({host}) cannot be reached ({_short(str(error))}): that node "
                    "ended its launch (it failed, or was stopped) or is unreachable"
                ) from None


def join_store(env: RankEnv, timeout: timedelta) -> dist.Store:
    """The rendezvous store, once every rank of the world has come to it (within `timeout`). A rank that
    refused the run first ends the wait as a RankFailed naming it and its error."""
    global _store, _joining
    _joining = True
    store = _connect(env, timeout)
    prefix = _prefix()
    deadline = time.monotonic() + timeout.total_seconds()
    try:
        arrived = store.add(prefix + "arrived", 1)
        while arrived < env.world_size:
            if store.check([prefix + "refused"]):
                raise _refusal(store, prefix)
            if time.monotonic() > deadline:
                raise GtoolError(
                    f"{env.world_size - arrived} of the {env.world_size} ranks did not come to the "
                    f"rendezvous at {env.master_addr}:{env.master_port} within {timeout} (a node not up?)"
                )
            time.sleep(POLL_SECONDS)
            arrived = store.add(prefix + "arrived", 0)
    except RuntimeError as error:  # the store's server went away while waiting
        raise GtoolError(
            f"the rendezvous at {env.master_addr}:{env.master_port} went away while rank {env.rank} waited "
            f"for the others ({_short(str(error))}): the node that served it ended its launch"
        ) from None
    _store = store
    return store


def _refusal(store: dist.Store, prefix: str) -> RankFailed:
    """The first refusal left in the store, as the failure of the rank that refused; counted as read."""
    first = json.loads(store.get(prefix + "refusal"))
    store.add(prefix + "told", 1)
    return RankFailed(first["rank"], f"on host {first['host']}, before joining the run: {first['error']}")


def tell_peers(error: str) -> None:
    """Leave this rank's refusal of the run, before it joined, for the ranks of torchrun or srun that wait
    for it; wait until one read it or every rank refused (at most TOLD_SECONDS: the store may go with this
    node; the others' launchers stop their ranks, or they find the store gone). Nothing when this rank is
    not one of such a world, already went to the rendezvous, or finds no store."""
    env = environment_rank()
    if env is None or env.world_size == 1 or _joining:
        return
    prefix = _prefix()
    note = {"rank": env.rank, "host": socket.gethostname(), "error": error}
    try:
        store = _connect(env, timedelta(seconds=TOLD_SECONDS))
        store.compare_set(prefix + "refusal", "", json.dumps(note))  # the first refusal is kept
        store.add(prefix + "refused", 1)
        deadline = time.monotonic() + TOLD_SECONDS
        while time.monotonic() < deadline and store.add(prefix + "told", 0) == 0:
            if store.add(prefix + "refused", 0) >= env.world_size:  # every rank refused: none waits
                return
            time.sleep(POLL_SECONDS)
    except (GtoolError, RuntimeError, KeyboardInterrupt):
        return  # nobody to tell (the others time out as before), or this rank was stopped: it ends anyway


def _short(text: str) -> str:
    """The gist of a torch or gloo error: its first sentence, without the source location."""
    text = re.sub(r"^\[[^\]]*\]\s*", "", text.strip())
    return text.split(". ")[0].split("\n")[0].rstrip(".")


def peer_trouble(error: BaseException) -> bool:
    """Whether `error` is what a rank sees when a peer went away (a collective's connection lost)."""
    return isinstance(error, dist.DistError) or bool(PEER_TROUBLE.search(str(error)))


def blame(rank: int, hosts: list[str], error: BaseException | None) -> RankFailed | None:
    """The failure to report for rank `rank` of a joined world (`hosts`: every rank's), whose collective
    failed with `error` (None: its launcher stopped it). This rank's note is left for the others; then,
    from theirs (waited for up to NOTES_SECONDS), the first rank that failed by itself, else the ranks that
    left no note and do not run on this machine (lost: their node died or went off the network; a rank
    of another machine stuck in a collective with a live one would be counted too); None when neither is
    known."""
    if _store is None:
        return None
    prefix, store = _prefix(), _store
    seen = "stopped by its launcher" if error is None else _short(str(error))
    try:
        store.set(f"{prefix}note/{rank}", json.dumps({"seen": seen}))
        noted = store.add(prefix + "notes", 1)
        deadline = time.monotonic() + NOTES_SECONDS
        while noted < len(hosts) and not store.check([prefix + "own"]) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            noted = store.add(prefix + "notes", 0)
        if store.check([prefix + "own"]):
            first = int(store.get(prefix + "own"))
            return RankFailed(first, json.loads(store.get(f"{prefix}note/{first}"))["seen"])
        alive = set(running_peers())  # on this machine: busy in a collective with a rank that noted
        lost_ranks = [
            r for r in range(len(hosts)) if r not in alive and not store.check([f"{prefix}note/{r}"])
        ]
    except RuntimeError as went:  # the store went with the node that served it
        gone = _short(str(went))
        return RankFailed(
            0,
            f"lost with its node ({gone})",
            headline=f"the node serving the rendezvous (--master-addr) was lost ({gone}): it died or went "
            f"off the network; rank {rank} saw: {seen}",
        )
    if not lost_ranks:
        return None
    if set(lost_ranks) <= set(gone_peers()):  # on this machine, their processes ended (killed)
        if len(lost_ranks) == 1:
            return RankFailed(lost_ranks[0], f"its process ended; rank {rank} saw: {seen}")
        why = "their processes ended without a word (killed?)"
    else:
        why = "they ended without a word (their node died or went off the network)"
    return RankFailed(
        lost_ranks[0],
        "lost",
        headline=f"{ranks_text(lost_ranks, hosts)} lost: {why}; rank {rank} saw: {seen}",
    )


def note_own_failure(rank: int, error: str) -> None:
    """Leave this rank's own failure (not a peer's) for the others, which name it (`blame`)."""
    if _store is None:
        return
    prefix = _prefix()
    with contextlib.suppress(RuntimeError):
        _store.set(f"{prefix}note/{rank}", json.dumps({"seen": error}))
        _store.compare_set(prefix + "own", "", str(rank))  # the first rank that failed by itself
        _store.add(prefix + "notes", 1)
