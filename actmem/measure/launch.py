"""Run a function on t real tensor-parallel ranks: t CPU processes, gloo.

Each rank is a fresh Python process (``spawn``, safe inside Jupyter) that
joins a ``torch.distributed`` process group through a key-value store
this process serves on 127.0.0.1 (``TCPStore`` on a port the system picks
as it binds, so no other program can take it first); nothing leaves the
machine. Each process uses one thread, so
two ranks fit on two cores.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import sys

import torch
import torch.distributed as dist

from ..validate import positive_int

TIMEOUT_S = 60
"""A rank that waits longer than this for the others raises."""


def on_ranks(fn, t: int, *args) -> list:
    """``[fn(0, *args), ..., fn(t-1, *args)]``, rank r run in process r.

    ``fn`` must be importable (a module-level function) and its arguments
    and result picklable. Inside ``fn`` the default process group has t
    ranks. An exception on any rank is raised here.

    Raises:
        TypeError: ``t`` is not an int (a bool is refused).
        ValueError: ``t`` < 1.
    """
    positive_int("t", t)
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=TIMEOUT_S))
    jobs = [(fn, rank, t, store.port, args) for rank in range(t)]
    with multiprocessing.get_context("spawn").Pool(t) as pool:
        return pool.starmap(_run_rank, jobs, chunksize=1)


def _run_rank(fn, rank, t, port, args):
    torch.set_num_threads(1)
    if sys.platform.startswith("linux"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    timeout = datetime.timedelta(seconds=TIMEOUT_S)
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=t, timeout=timeout)
    try:
        return fn(rank, *args)
    finally:
        dist.destroy_process_group()
