"""GPU presets: capacities as nvidia-smi / rocminfo report them, and the
names, sizes and errors :func:`gpu_capacity` accepts."""

import doctest

import pytest

from actmem.run.job import gpus
from actmem.run.job.gpus import GPU, GPUS, MiB, gpu_capacity

REQUIRED = ("A100 40GB", "A100 80GB", "H100 80GB SXM", "H100 80GB PCIe", "H200", "B200",
            "L4", "L40S", "RTX 4090", "V100 16GB", "V100 32GB", "MI300X")


def test_required_presets_exist():
    assert set(REQUIRED) <= set(GPUS)
    assert all(GPUS[name].name == name for name in GPUS)


@pytest.mark.parametrize("name, mib", [("A100 80GB", 81920), ("H100 80GB SXM", 81559),
                                       ("A100 40GB", 40960), ("H200", 143771),
                                       ("RTX 4090", 24564), ("L4", 23034), ("L40S", 46068),
                                       ("B200", 183359), ("MI300X", 196592)])
def test_published_totals(name, mib):
    assert gpu_capacity(name) == mib * 2**20 == GPUS[name].memory


@pytest.mark.parametrize("text", ["h100 80gb sxm", "H100-80GB-SXM", "  H100 80GB SXM ",
                                  "h100_80gb_sxm", "H10080GBSXM"])
def test_name_matching_ignores_case_spaces_hyphens(text):
    assert gpu_capacity(text) == 81559 * MiB


def test_a100_with_hyphen():
    assert gpu_capacity("A100-80GB") == 81920 * MiB
    assert gpu_capacity("mi300x") == GPUS["MI300X"].memory


def test_normalised_names_are_unique():
    assert len(gpus._NAMES_BY_KEY) == len(GPUS)


def test_gpu_instance_and_custom_gpu():
    assert gpu_capacity(GPUS["L4"]) == 23034 * MiB
    custom = GPU("test card", 12345, (8, 6), 12, "made up for a test")
    assert gpu_capacity(custom) == 12345


def test_bytes_and_sizes():
    assert gpu_capacity(85899345920) == 85899345920
    assert gpu_capacity("80GiB") == 80 * 2**30
    assert gpu_capacity("80GB") == 80 * 10**9       # SI: a fact about units


def test_label_is_not_a_unit():
    """An '80GB' H100 holds more than '80GB' and less than '80GiB'."""
    assert gpu_capacity("80GB") < gpu_capacity("H100 80GB SXM") < gpu_capacity("80GiB")


def test_str():
    assert str(GPUS["H100 80GB SXM"]) == "H100 80GB SXM: 81559 MiB (79.65 GiB)"
    assert str(GPUS["A100 80GB"]) == "A100 80GB: 81920 MiB (80 GiB)"


def test_frozen():
    with pytest.raises(AttributeError):
        GPUS["L4"].memory = 1


@pytest.mark.parametrize("bad", ["H100", "A100", "Z9000", "", "RTX4080"])
def test_unknown_name_lists_presets(bad):
    with pytest.raises(ValueError) as info:
        gpu_capacity(bad)
    message = str(info.value)
    assert "gpu_memory" in message and repr(bad) in message
    assert all(repr(name) in message for name in GPUS)
    assert "80GiB" in message


@pytest.mark.parametrize("bad, error", [(True, TypeError), (False, TypeError),
                                        (80.0, TypeError), (1.5e10, TypeError),
                                        (None, TypeError), ([80], TypeError),
                                        (-1, ValueError), (0, ValueError),
                                        ("80 GiBs", ValueError), ("0.5B", ValueError),
                                        ("-80GiB", ValueError)])
def test_bad_values(bad, error):
    with pytest.raises(error) as info:
        gpu_capacity(bad)
    message = str(info.value)
    assert "gpu_memory" in message
    assert "'H100 80GB SXM'" in message and "'MI300X'" in message


@pytest.mark.parametrize("name", sorted(GPUS))
def test_every_preset_is_sourced_and_sane(name):
    gpu = GPUS[name]
    assert gpu.source.strip()
    assert "http" in gpu.source or "no single address" in gpu.source
    assert isinstance(gpu.memory, int) and gpu.memory % MiB == 0
    assert gpu.label_gb * 0.9 * 10**9 < gpu.memory < gpu.label_gb * 1.1 * 2**30
    cc = gpu.compute_capability
    assert cc is None or (len(cc) == 2 and all(isinstance(x, int) for x in cc))


def test_docstring_examples():
    result = doctest.testmod(gpus)
    assert result.attempted > 0 and result.failed == 0


# E2 of the review: bf16 and FlashAttention need compute capability 8.0

def _v100_refusal(option, value, gpu):
    return (rf"^{option}={value!r} does not run on gpu_memory='{gpu}' \(compute capability "
            r"7\.0\): ")


@pytest.mark.parametrize("gpu", ["V100 16GB", "V100 32GB"])
@pytest.mark.parametrize("precision", ["bf16", "autocast"])
def test_volta_refuses_bf16(gpu, precision):
    import actmem
    model = actmem.PRESETS["gpt2-large"]   # no FlashAttention: the precision is refused
    with pytest.raises(ValueError, match=_v100_refusal("precision", precision, gpu)
                       + r"bf16 needs compute capability 8\.0 \(Ampere\) or newer: PyTorch's "
                       r"torch\.cuda\.is_bf16_supported\(including_emulation=False\) is False "
                       r"below it \(torch/cuda/__init__\.py\); use precision='fp32' or a "
                       r"newer GPU$"):
        actmem.Job(model, precision=precision, gpu_memory=gpu)


def test_volta_refuses_flash_attention_and_runs_fp32_without_it():
    import actmem
    model = actmem.PRESETS["llama2-7b"]
    assert model.flash_attention
    with pytest.raises(ValueError, match=_v100_refusal("flash_attention", True, "V100 32GB")
                       + r"FlashAttention-2 needs compute capability 8\.0 \(Ampere\) or newer "
                       r"\(Dao-AILab/flash-attention's README; FlashAttention 1 also ran on "
                       r"Turing, 7\.5, and neither on Volta: Dao-AILab/flash-attention#148\); "
                       r"use flash_attention=False"):
        actmem.training_memory(model, precision="fp32", gpu_memory="V100 32GB")
    r = actmem.training_memory(model.with_(flash_attention=False), precision="fp32",
                               gpu_memory="V100 32GB")
    assert r.gpu_memory == 32768 * MiB


def test_only_volta_is_refused():
    refused = {name for name, gpu in GPUS.items() if gpus.gpu_runs(gpu, "bf16", True)}
    assert refused == {"V100 16GB", "V100 32GB"}   # the MI300X (AMD, no capability) runs both
    assert gpus.gpu_runs(GPUS["V100 32GB"], "fp32", True) == "flash_attention"
    assert gpus.gpu_runs(GPUS["V100 32GB"], "fp32", False) is None
    assert gpus.gpu_runs(None, "bf16", True) is None   # a size, not a GPU


def test_fp8_needs_compute_capability_8_9():
    """Transformer Engine's check_fp8_support: 9.0 and newer run FP8, below
    8.9 nothing does (A100 8.0, V100 7.0); the L4, L40S and RTX 4090 are 8.9."""
    import actmem
    runs = {name for name, gpu in GPUS.items() if not gpus.gpu_runs(gpu, "fp32", False, "e4m3")}
    assert runs == set(GPUS) - {"A100 40GB", "A100 80GB", "V100 16GB", "V100 32GB", "MI300X"}
    with pytest.raises(ValueError, match=r"^fp8='hybrid' does not run on gpu_memory='A100 80GB' "
                                         r"\(compute capability 8\.0\): Transformer Engine's "
                                         r"FP8 needs compute capability 8\.9 \(Ada\) or newer "
                                         r".*check_fp8_support.*; use fp8=None or a newer GPU$"):
        actmem.training_memory(actmem.PRESETS["llama2-7b"], fp8="hybrid", gpu_memory="A100 80GB")
    assert actmem.training_memory(actmem.PRESETS["llama2-7b"], fp8="hybrid",
                                  gpu_memory="L4").gpu_memory == 23034 * MiB


def test_the_planner_offers_only_gpus_that_run_the_job():
    from actmem.views.fit_levers import gpu_choices
    from actmem.views.fit_views import FitPlanner
    assert gpu_choices("fp32", False) == list(GPUS)
    assert gpu_choices("bf16", False) == [n for n in GPUS if not n.startswith("V100")]
    with pytest.raises(ValueError, match=r"gpu='V100 32GB' is not offered; .*compute "
                                         r"capability 8\.0"):
        FitPlanner(gpu="V100 32GB")


@pytest.mark.parametrize("fp8", ["e4m3", "hybrid"])
def test_fp8_on_an_amd_gpu_is_refused_by_name(fp8):
    """An AMD GPU has no CUDA compute capability, and actmem models NVIDIA's
    Transformer Engine: FP8 there is refused before any work (it raised a
    TypeError from fp8_transpose before); the planner offers it off only."""
    import actmem
    from actmem.views.fit_levers import fp8_options
    with pytest.raises(ValueError, match=rf"^fp8='{fp8}' does not run on gpu_memory='MI300X' "
                                         r"\(an AMD GPU\): actmem models NVIDIA's Transformer "
                                         r"Engine FP8.*; use fp8=None$"):
        actmem.training_memory(actmem.PRESETS["llama2-7b"], fp8=fp8, t=2,
                               sequence_parallel=True, gpu_memory="MI300X")
    assert fp8_options(actmem.PRESETS["llama2-7b"], 2, True, "none", None, 1,
                       gpu="MI300X") == [("off", "off")]
    assert gpus.gpu_runs(GPUS["MI300X"], "bf16", True) is None   # the rest runs
