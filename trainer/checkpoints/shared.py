"""Locations the ranks of a run must share, proven shared before any work: rank 0 leaves a token there and
every rank looks for it where it would write (its own resolution of the path).

A checkpoint folder or a prediction's staging folder that some ranks do not see (a node-local folder, a
relative path resolved in another working directory) would split a checkpoint over the nodes or publish
an output without the other nodes' rows; it is refused on every rank with the same one-line error.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
from typing import Any

import fsspec
import torch.distributed as dist

from gtool.errors import GtoolError
from gtool.store.writing.staging import is_url, local_path
from gtool.trainer.comm.groups import AxisGroup
from gtool.trainer.launch.failures import ranks_text

TOKEN_PREFIX = ".gtool-visible-"


def _fs(location: str) -> tuple[Any, str]:
    """The file system of `location` and the path in it."""
    if is_url(location):
        return fsspec.core.url_to_fs(location)
    return fsspec.filesystem("file"), local_path(location)


def _sees(location: str, name: str) -> bool:
    """Whether the token `name` is in the folder `location` as this process sees it."""
    fs, path = _fs(location)
    try:
        return bool(fs.exists(f"{path.rstrip('/')}/{name}"))
    except (OSError, ValueError):  # an unreachable object store, missing credentials: not seen
        return False


def gather_objects(group: AxisGroup, value: Any) -> list[Any]:
    """`value` of every rank of `group`, by index."""
    if group.group is None:
        return [value]
    gathered: list[Any] = [None] * group.size
    dist.all_gather_object(gathered, value, group=group.group)
    return gathered


def broadcast_object(group: AxisGroup, value: Any) -> Any:
    """Rank 0's `value` of `group`, on every rank of it (world rank 0 leads every group a run makes)."""
    if group.group is None:
        return value
    holder = [value]
    dist.broadcast_object_list(holder, src=dist.get_global_rank(group.group, 0), group=group.group)
    return holder[0]


def require_shared(group: AxisGroup, location: str, what: str, remedy: str) -> None:
    """Refuse, on every rank of `group`, a folder `location` (as each rank resolved it; made by rank 0
    before) in which some rank does not find the token rank 0 left there. `what` names the location in
    the message (e.g. "--checkpoint"); `remedy` says what to use instead."""
    name = broadcast_object(group, TOKEN_PREFIX + secrets.token_hex(8))
    fs, path = _fs(location)
    token = f"{path.rstrip('/')}/{name}"
    if group.index == 0:
        fs.pipe_file(token, socket.gethostname().encode())
    if group.group is not None:
        dist.barrier(group=group.group)
    seen = gather_objects(group, (_sees(location, name), socket.gethostname(), location))
    if group.index == 0:
        with contextlib.suppress(OSError):
            fs.rm_file(token)
    blind = [rank for rank, (sees, _, _) in enumerate(seen) if not sees]
    if not blind:
        return
    hosts = [host for _, host, _ in seen]
    elsewhere = sorted({where for sees, _, where in seen if not sees and where != seen[0][2]})
    looked = f" (they look in {', '.join(elsewhere)})" if elsewhere else ""
    raise GtoolError(
        f"{what} {seen[0][2]}: {ranks_text(blind, hosts)} cannot see it{looked}, so the ranks would not "
        f"share what they write there; nothing was written. {remedy}"
    )
