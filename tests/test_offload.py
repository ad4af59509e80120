"""Activation offloading (issue 23, item 6): Megatron-LM's --cpu-offloading-num-layers
through Transformer Engine's offload. Numbers derived by hand from the rows and
TE's rule (actmem/run/moments/offload.py): rows of >= 256 x 1024 elements move, L - n
layers' of them stay on the GPU, n layers' go to pinned host memory.
"""

import pytest

from actmem import LayerConfig, PRESETS, training_memory
from actmem.run.moments.offload import OFFLOAD_MIN_ELEMENTS, cpu_offload, split_rows

LLAMA = PRESETS["llama2-7b"]          # s = 4096, b = 1, h = 4096, f = 11008, a = 32, L = 32
SBH, SBF = 4096 * 4096, 4096 * 11008
OFF = 16 * SBH + 6 * SBF              # 8 rows of 2sbh, SwiGLU's gate, up and fc2 input
LSE = 4 * 32 * 4096                   # FlashAttention's fp32 statistics: 131,072 elements


def test_llama_offloads_every_row_but_the_small_statistics():
    o = cpu_offload(LLAMA, 1, 16)
    assert OFFLOAD_MIN_ELEMENTS == 262144
    assert o.resident_rows == ("softmax_lse",) and len(o.offloaded_rows) == 11
    assert (o.offloadable, o.resident) == (OFF, LSE)
    assert o.gpu_activations == 16 * OFF + 32 * LSE
    assert o.host == o.saving == 16 * OFF


@pytest.mark.parametrize("n", [1, 31])
def test_training_memory_keeps_l_minus_n_layers_on_the_gpu(n):
    plain = training_memory(LLAMA, m=2).stages[0]
    off = training_memory(LLAMA, m=2, cpu_offloading_num_layers=n).stages[0]
    assert plain.layer_activations - off.layer_activations == n * OFF
    assert plain.peak - off.peak == n * OFF     # the peak (the loss) holds one pass
    assert off.host_memory == n * OFF and plain.host_memory == 0
    assert training_memory(LLAMA, m=2, cpu_offloading_num_layers=0).stages[0] == plain
    quiet = [e for e in off.timeline.events if not e.by_category["activations"]]
    assert quiet and all(e in plain.timeline.events for e in quiet)


@pytest.mark.parametrize("options, error, match", [
    (dict(cpu_offloading_num_layers=32), ValueError, "between 0 and L-1=31"),
    (dict(cpu_offloading_num_layers=-1), ValueError, "between 0 and L-1"),
    (dict(cpu_offloading_num_layers="4"), TypeError, "cpu_offloading_num_layers"),
    (dict(cpu_offloading_num_layers=4, p=2), ValueError, "pipeline parallelism"),
    (dict(cpu_offloading_num_layers=4, recompute="selective"), ValueError, "recomputation"),
    (dict(cpu_offloading_num_layers=4, schedule="gpipe"), ValueError, "one micro-batch"),
])
def test_refused_before_any_work(options, error, match):
    with pytest.raises(error, match=match):
        training_memory(LLAMA, **options)


def test_moe_models_are_refused():
    from actmem import MOE_PRESETS
    with pytest.raises(ValueError, match="modelled for dense models"):
        training_memory(MOE_PRESETS["mixtral-8x7b"], t=2, sequence_parallel=True,
                        cpu_offloading_num_layers=4)


STRADDLE = LayerConfig(512, 1, 256, 4)   # sbh = 131,072 < 262,144 <= sbf, the map's 1,048,576


def test_measured_storages_move_as_the_rows_do():
    pytest.importorskip("torch")
    from actmem.measure.offload import measure_offload, offload_gradients_match
    moved, kept = split_rows(STRADDLE)
    m = measure_offload(STRADDLE)
    assert m.moved == {r.key: r.bytes for r in moved}
    assert {k: v for k, v in m.kept.items() if k is not None} == {r.key: r.bytes for r in kept}
    assert set(m.moved) == {"softmax_output", "attn_dropout_mask", "attn_dropout_output",
                            "gelu_input", "fc2_input"}
    assert m.kept[None] == 4 * 2 * 512      # LayerNorm's mean and rstd, 2 norms, bf16
    same, copied = offload_gradients_match(STRADDLE)
    assert same and copied == sum(r.bytes for r in moved) == 7 * 2**20
