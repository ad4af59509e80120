"""GPU presets: capacities as nvidia-smi / rocminfo report them, and the
names, sizes and errors :func:`gpu_capacity` accepts."""

import doctest

import pytest

from actmem.run import gpus
from actmem.run.gpus import GPU, GPUS, MiB, gpu_capacity

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
