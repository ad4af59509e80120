"""The default reserve: what a GPU uses beyond ``torch.cuda.max_memory_allocated()``.

:func:`actmem.training_memory`'s peak is what PyTorch's caching allocator
hands out. A GPU needs more: (0) what its driver keeps (CUDA's total is
less than ``nvidia-smi``'s), (1) the CUDA context, (2) NCCL's buffers, which
the allocator never sees, and (3) the allocator's gap between the memory it
has reserved from CUDA and the memory it has handed out. With a GPU preset
named and ``reserve="default"`` (the default), each pipeline stage's reserve
is :func:`default_reserve`, the sum of these four parts, each a function
below with its source, and, with the flex dispatcher, (4) DeepEP's buffers
(:func:`actmem.layer.moe_flex.deepep_buffer`, or its HybridEP's:
:func:`actmem.layer.moe_hybridep.hybridep_buffer`), which the allocator does
not see either. The research behind every constant, and which are
judgement, is in ``docs/reserve-sources.md``.

It is an estimate. Calibrate it on your GPU: after one whole training step,
``total - free`` from ``torch.cuda.mem_get_info()`` less
``torch.cuda.memory_reserved()`` is the context plus NCCL (vLLM PR #11809's
method); ``memory_reserved() - max_memory_allocated()`` is the allocator's
gap; NCCL >= 2.29.7 reports its own bytes (``ncclCommMemStats``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from .job.record_fields import check_fields

MiB = 2**20
DRIVER = {"A100 40GB": 621 * MiB, "A100 80GB": 768 * MiB, "H100 80GB SXM": 550 * MiB,
          "RTX 4090": 316 * MiB, "V100 32GB": 266 * MiB}
"""``nvidia-smi``'s total less CUDA's, bytes, by GPU preset: the largest gap
published (:func:`driver_reserved` gives the sources)."""
DRIVER_UNKNOWN = max(DRIVER.values())
"""A GPU with no published gap: the largest of the others (judgement)."""
CUDA_CONTEXT = 512 * MiB
"""The CUDA context with lazy module loading, bytes (0.5 GiB)."""
CONNECTION = 10 * MiB
"""NCCL's buffers of one connection on one channel, bytes."""
CHANNELS, ALGORITHMS = 16, 2
"""Channels of a collective communicator; algorithms that connect (ring, tree)."""
P2P_CHANNELS_PER_PEER = 32
"""Channels NCCL opens to each send/receive peer over NVLink."""
NET_CHANNELS_PER_PEER, NODE_PEERS = 2, 7
"""Channels to a peer over the network; peers one GPU has in its 8-GPU node."""
NVLS = {"H100 80GB SXM": 256 * MiB, "H200": 256 * MiB, "B200": 384 * MiB}
"""NVLink SHARP buffers per communicator of more than 2 GPUs, bytes, by GPU preset."""
GAP = {False: Fraction(10, 100), True: Fraction(3, 100)}
"""The allocator's gap as a fraction of the peak, by ``expandable_segments``."""
SEGMENT_SLACK = 20 * MiB
"""One large-pool segment the allocator holds beyond its blocks, bytes."""
class Communicator(NamedTuple):
    """One NCCL communicator a training step uses: Megatron-LM's process
    group ``name``, its ``ranks`` and, for send/receive (point-to-point)
    traffic, the ``peers`` one GPU exchanges with (None: collectives)."""

    name: str
    ranks: int
    peers: int | None = None


@dataclass(frozen=True)
class ReserveParts:
    """One GPU's default reserve by part, bytes (:func:`default_reserve`).

    Attributes:
        driver: :func:`driver_reserved`.
        cuda_context: :func:`cuda_context`.
        nccl: :func:`nccl_buffers` of ``communicators``.
        allocator: :func:`allocator_gap`.
        communicators: the names of the communicators counted.
        deepep: the flex dispatcher's buffers, DeepEP's
            (:func:`actmem.layer.moe_flex.deepep_buffer`) or its HybridEP's
            (:func:`actmem.layer.moe_hybridep.hybridep_buffer`), else 0.
    """

    driver: int
    cuda_context: int
    nccl: int
    allocator: int
    communicators: tuple[str, ...] = ()
    deepep: int = 0

    def __post_init__(self):
        """Raises TypeError, ValueError: bytes that are not integers >= 0,
        communicators that are not a tuple of str."""
        check_fields(self)

    @property
    def total(self) -> int:
        """The parts added, bytes."""
        return self.driver + self.cuda_context + self.nccl + self.allocator + self.deepep


def driver_reserved(gpu_name: str) -> int:
    """What the driver keeps of a GPU, bytes: ``nvidia-smi``'s total (the
    presets' memory) less CUDA's (``cudaMemGetInfo``, the "total capacity"
    PyTorch's out-of-memory message prints), which no process can allocate.
    Published pairs, the largest gap kept per GPU: A100 40GB 40339 MiB
    (bottlerocket-os/bottlerocket PR #3873) and 39.50 GiB (TianheWu/CoSeR#10);
    A100 80GB 79.35 GiB (Instruction-Tuning-with-GPT-4/GPT-4-LLM#16) and
    79.25 GiB (levihsu/OOTDiffusion#235); H100 80GB 79.11 GiB
    (vllm-project/vllm#27508); RTX 4090 23.68 GiB (zai-org/CogVideo#36); V100
    32GB 31.74 GiB (haotian-liu/LLaVA#812). The gap depends on the driver and
    ECC; for a GPU with none published, :data:`DRIVER_UNKNOWN` (judgement)."""
    return DRIVER.get(gpu_name, DRIVER_UNKNOWN)


def cuda_context() -> int:
    """The CUDA context of one process, bytes: 0.5 GiB.

    Lazy module loading (``CUDA_MODULE_LOADING=LAZY``, PyTorch's default
    since 1.13, pytorch/pytorch PR #86509; the driver's default since CUDA
    12.2) loads a kernel when it is first used. Published figures with it:
    about 254 MiB net in PR #86509's A/B test (287,047,680 B lazy against
    666,632,192 B eager), "~300 MB" (pytorch/pytorch#107667), "around
    400MB" (#109888); 0.5 GiB rounds them up, since cuBLAS, NCCL and
    Transformer Engine load more kernels during a step. Eager loading
    (before CUDA 11.7) took about 1 GiB (#107667: ">1000 MB").

    It is the same for every GPU: no published measurement gives it per
    GPU generation or per CUDA 12.x version (the A/B test names no GPU).
    """
    return CUDA_CONTEXT


def _flex_buffers(job) -> int:
    """DeepEP's buffers (:func:`actmem.layer.moe_flex.deepep_buffer`) or
    HybridEP's (:func:`actmem.layer.moe_hybridep.hybridep_buffer`) on one
    GPU of the flex dispatcher's group."""
    from ..layer.moe_flex import deepep_buffer
    from ..layer.moe_hybridep import hybridep_buffer
    model, W = job.model, (job.t if job.etp is None else job.etp) * job.ep
    if model.moe_flex_dispatcher_backend == "hybridep":
        tokens = model.s // job.cp * model.b // job.t
        return hybridep_buffer(model.h, tokens, model.num_experts // job.ep, W)
    return deepep_buffer(model.h, W)


def communicators(job, stage: int) -> tuple[Communicator, ...]:
    """The NCCL communicators of more than one GPU that pipeline stage
    ``stage`` of ``job`` (a :class:`actmem.Job`) uses in a step, as
    Megatron-LM's ``megatron/core/parallel_state.py`` creates them
    (communicators are not shared: NCCL's ``splitShare`` defaults to 0):

    * tensor (t): the layers' all-reduces, all-gathers, reduce-scatters;
    * data (d*cp, ``DATA_PARALLEL_GROUP_WITH_CP``): the gradients';
    * gradient norm: the model-parallel group (t*p), or every GPU
      (t*p*d*cp) with the distributed optimizer (``optimizer.py`` and
      ``distrib_optimizer.py``: ``get_grad_stats_parallel_group``);
    * pipeline (p): send/receive with the stage's neighbours (2 peers, 1
      when p = 2; the end stages are counted as the middle ones: judgement);
    * embedding (2 GPUs): the first and the last stage all-reduce a tied
      embedding's gradient (p > 1);
    * context (cp): send/receive around a ring (cp_comm_type ``"p2p"``), an
      all-to-all (``"a2a"``, ``"a2a+p2p"``: cp - 1 peers) or all-gathers;
    * expert (ep): the token dispatcher's all-to-all (ep - 1 peers); with
      the flex dispatcher none, its tokens travel in DeepEP's buffers
      (:func:`actmem.layer.moe_flex.deepep_buffer`), whose setup gathers
      over the expert tensor and expert group, etp*ep (``deep_ep/buffer.py``:
      Buffer.__init__, ``all_gather_object``); expert
      tensor (etp); expert data (t*cp*d/(ep*etp)): the experts' gradients;
      expert gradient norm (etp*ep*p);
    * FP8 amax (t*d*cp): Transformer Engine's amax reduction (``fp8`` set).

    Groups Megatron-LM creates but a step does not use, and Gloo groups (no
    GPU memory), are not counted: since NCCL 2.22 a communicator allocates
    an algorithm's buffers only when it first runs it
    (``NCCL_RUNTIME_CONNECT``).
    """
    from .model_states.states import expert_data_parallel
    j, model = job, job.model
    world = j.t * j.p * j.d * j.cp
    pairs = [Communicator("tensor", j.t), Communicator("data", j.d * j.cp),
             Communicator("gradient norm", world if j.distributed_optimizer else j.t * j.p),
             Communicator("pipeline", j.p, min(2, j.p - 1))]
    if model.tied_embeddings and j.p > 1 and stage in (0, j.p - 1):
        pairs.append(Communicator("embedding", 2))
    if j.cp_comm_type == "allgather":
        pairs.append(Communicator("context", j.cp))
    else:
        pairs.append(Communicator("context", j.cp, min(2, j.cp - 1) if j.cp_comm_type == "p2p"
                                  else j.cp - 1))
    if model.num_experts is not None:
        etp = j.t if j.etp is None else j.etp
        if model.moe_token_dispatcher_type == "flex":   # DeepEP's (HybridEP's) setup gather
            pairs.append(Communicator("expert tensor and expert", etp * j.ep))
        else:
            pairs.append(Communicator("expert", j.ep, j.ep - 1))
        pairs += [Communicator("expert tensor", etp),
                  Communicator("expert data",
                               expert_data_parallel(model, j.t, j.d, j.ep, j.etp, j.cp)),
                  Communicator("expert gradient norm", etp * j.ep * j.p)]
    if j.fp8:
        pairs.append(Communicator("fp8 amax", j.t * j.d * j.cp))
    return tuple(c for c in pairs if c.ranks > 1)


def nccl_buffers(used: tuple[Communicator, ...], gpu_name: str) -> int:
    """NCCL's buffers on one GPU for the communicators ``used``, bytes, on
    the GPU preset ``gpu_name``.

    * A connection on one channel holds 10 MiB: each receiver allocates
      the three protocols' buffers, SIMPLE 4 MiB (``NCCL_BUFFSIZE``), LL
      512 KiB, LL128 4.6875 MiB (NCCL ``src/init.cc:computeBuffSizes``,
      ``src/transport/p2p.cc:p2pRecvSetup``), 9.19 MiB rounded up to cuMem's
      2 MiB granularity; NVIDIA/nccl#1685 shows 10,485,760 B allocations on
      8 H100s.
    * A collective communicator: 16 channels (H100 logs, NVIDIA/nccl#1453)
      x 2 algorithms that connect (ring and tree) x 10 MiB = 320 MiB. The
      channel count depends on the topology and NCCL's version, and which
      algorithms connect on the sizes sent: both are judgement.
    * Plus NVLink SHARP (NVLS, on by default where supported: NVSwitch
      GPUs from Hopper on) for a communicator of more than 2 GPUs:
      channels x 2 x 1 MiB x 8 local GPUs, 256 MiB on H100/H200 (16
      channels), 384 MiB on B200 (24), NCCL >= 2.21
      (``src/transport/nvls.cc:ncclNvlsBufferSetup``); it assumes the
      group's GPUs share one NVSwitch node (judgement).
    * A send/receive peer: channels x 10 MiB. NCCL opens 2 x (NVLink
      bandwidth / one link's) channels per NVLink peer, rounded to a power
      of two and capped at the communicator's channels, and 2 per peer over
      the network where it knows no NIC bandwidth
      (``src/graph/paths.cc:ncclTopoGetNchannels``,
      ``ncclTopoComputeP2pChannels``); an all-to-all on 8 H100s opened 32
      per pair (NVIDIA/nccl#1685). Here the first 7 peers share the GPU's
      8-GPU NVLink node (32 channels each) and the others are over the
      network (2 each): judgement, as Megatron-LM's rank order puts the
      groups of the inner sizes (t, cp, ep) in one node first.

    NCCL documents no memory size per communicator (its maintainer:
    "memory usage is linearly tied to the number of channels",
    NVIDIA/nccl#864); this sum is an estimate.
    """
    collective = CHANNELS * ALGORITHMS * CONNECTION
    return sum(_p2p_channels(c.peers) * CONNECTION if c.peers is not None
               else collective + NVLS.get(gpu_name, 0) * (c.ranks > 2) for c in used)


def _p2p_channels(peers: int) -> int:
    """Channels to ``peers`` send/receive peers: those in the node over
    NVLink, the rest over the network (:func:`nccl_buffers`)."""
    near = min(peers, NODE_PEERS)
    return near * P2P_CHANNELS_PER_PEER + (peers - near) * NET_CHANNELS_PER_PEER


def allocator_gap(peak: int, expandable_segments: bool = False,
                  limit: int | None = None) -> int:
    """PyTorch's caching allocator's reserved-but-unallocated memory at a
    peak of ``peak`` bytes allocated, bytes: 10 % of the peak (3 % with
    ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``), rounded up, plus
    one 20 MiB segment; at most ``limit`` bytes (what the GPU has beside
    the context and NCCL: the allocator cannot reserve more, and a gap
    that large already means the job does not fit, so the verdict is the
    same).

    Freed blocks in different ``cudaMalloc`` segments never merge, and
    requests of 1 to 10 MiB take 20 MiB segments
    (``c10/cuda/CUDACachingAllocator.cpp``: ``kLargeBuffer``,
    ``get_allocation_size``). Published gaps: 2.4 % (vllm-project/
    compressed-tensors PR #587), about 11 % (pytorch/pytorch#40989), 15 %
    on average, up to 33 % with recomputation or offloading (GMLake,
    ASPLOS'24); expandable segments (one growing segment per stream,
    pytorch/pytorch PR #96995) cut 16.39 GiB to 10.83 GiB reserved in
    meta-pytorch/torchtune#1185. No source measures the fraction in
    general: 10 % and 3 % are judgement from these cases, as is one
    segment of slack (one stream).
    """
    gap = math.ceil(GAP[bool(expandable_segments)] * peak) + SEGMENT_SLACK
    return gap if limit is None else min(gap, max(0, limit))


def default_reserve(job, stage: int, peak: int, gpu) -> ReserveParts:
    """Pipeline stage ``stage``'s default reserve on ``gpu`` (a
    :class:`actmem.run.job.gpus.GPU` preset), at its peak of ``peak`` bytes:
    :func:`driver_reserved`, :func:`cuda_context`, :func:`nccl_buffers` of
    :func:`communicators` and
    :func:`allocator_gap` (with ``job.expandable_segments``, at most what
    the GPU has left). The sources are NVIDIA's and PyTorch's; on the AMD
    MI300X the same figures stand in for HIP's context and RCCL (NCCL's
    port), unmeasured."""
    used = communicators(job, stage)
    driver, context, nccl = driver_reserved(gpu.name), cuda_context(), nccl_buffers(used, gpu.name)
    model = job.model
    deepep = 0
    if model.num_experts is not None and model.moe_token_dispatcher_type == "flex":
        deepep = _flex_buffers(job)
    return ReserveParts(driver, context, nccl,
                        allocator_gap(peak, job.expandable_segments,
                                      gpu.memory - driver - context - nccl - deepep),
                        tuple(c.name for c in used), deepep)
