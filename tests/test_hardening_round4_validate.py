"""Issue 39, kinds 5, 10, 11, 13 and 20: the divisor search never hangs, the
cuBLAS workspace config and cp_comm_type are checked strictly, and the
measure command refuses sizes it cannot run and lists every subcommand.
Each test covers a kind over several inputs; none depends on the
machine's speed (the numbers of kind 5 hung the old code, and finish at
once now)."""

import math
import re

import numpy as np
import pytest

import actmem
from actmem.run.moments.framework import torch_cublas_workspace
from actmem.validate import common_divisors, divides, divisors, prime_factors

P = actmem.PRESETS["llama2-7b"]

# ------------------------------------------------ kind 5: the divisor search

M61, M89, M107 = 2**61 - 1, 2**89 - 1, 2**107 - 1  # Mersenne primes
HARD = [M61 * M89,                            # the number
        M89 * M107,
        910826445407067064607048378357,       # 30 digits: two 50-bit primes
        (2**127 - 1) * (2**521 - 1),
        2**4423 - 1]                          # a 1332-digit prime, too wide to test


@pytest.mark.parametrize("n", HARD, ids=["M61*M89", "M89*M107", "30 digits", "M127*M521", "M4423"])
@pytest.mark.parametrize("small", [1, 12, 2**10 * 3**4])
def test_divisor_search_reports_what_it_cannot_factor(n, small):
    found = divisors(small)
    target = small * n
    with pytest.raises(ValueError, match=r"^cannot list the divisors of numbers\[0\]=") as err:
        common_divisors(target)
    assert "cannot be split quickly" in str(err.value)
    assert str(err.value).endswith(f"divisors found: {', '.join(map(str, found))}")
    with pytest.raises(ValueError, match=r"^cannot factor n=\d+: it has a factor"):
        prime_factors(target)
    with pytest.raises(ValueError, match=r"^cannot factor n="):
        divisors(target)
    bad = 7 if small % 7 else 11
    with pytest.raises(ValueError) as err:
        divides("t", bad, a=target, h=2 * target)
    assert str(err.value) == (f"t={bad} must divide a={target} and h={2 * target}; valid t: "
                              f"{', '.join(map(str, found))} and other divisors of {target}")
    assert divides("t", small, a=target) == small  # a divisor is still accepted


def test_divisor_search_still_exact_where_it_can_factor():
    assert prime_factors(M61 * (2**31 - 1)) == {2**31 - 1: 1, M61: 1}
    assert prime_factors(M61 * 4294967291) == {4294967291: 1, M61: 1}  # 2^32 - 5, a prime
    assert common_divisors(2**521 - 1) == [1, 2**521 - 1]  # a 157-digit prime
    assert common_divisors(a=52, h=6656) == [1, 2, 4, 13, 26, 52]
    with pytest.raises(ValueError, match=r"^t=3 must divide a=52; valid t: 1, 2, 4, 13, 26, 52$"):
        divides("t", 3, a=52)


def test_callers_name_their_arguments_for_numbers_they_cannot_factor():
    n = M61 * M89
    with pytest.raises(ValueError, match=rf"^cannot list the divisors of a={n} and h={n}: "
                                         rf"their greatest common divisor {n} has"):
        actmem.valid_tensor_parallel_sizes(n, n)
    with pytest.raises(ValueError, match=rf"^cannot list the divisors of s/2={n}:"):
        actmem.valid_context_parallel_sizes(2 * n, 4)
    with pytest.raises(ValueError, match=rf"^t=3 must divide a={8 * n} and h={8 * n}; "
                                         rf"valid t: 1, 2, 4, 8 and other divisors of {8 * n}$"):
        actmem.activation_memory(2048, 1, 8 * n, 8 * n, 3)
    assert actmem.valid_context_parallel_sizes(7, 4) == [1]  # no cp splits 7 into 2cp chunks
    assert actmem.valid_context_parallel_sizes(28, 4) == [1, 2, 7, 14]


# ------------------------------------------- kind 10: cublas_workspace_config

@pytest.mark.parametrize("config", [
    "xx:4096:8yy", ":4096:8 junk", " :4096:8", ":4096:8\n", "4096:8", ":4096:8:", ":4096",
    ":4096:8,:16:8", ":4096:8;:16:8", "::", "", ":+4096:8", ":4_096:8", ":\u0664096:8",
    ":2147483648:1", ":1:" + "9" * 5000])
def test_cublas_workspace_config_must_be_pairs_and_nothing_else(config):
    message = (f"cublas_workspace_config must be one or more ':SIZE:COUNT' pairs and "
               f"nothing else, SIZE in KiB and COUNT each a whole number up to 2**31 - 1 "
               f"(e.g. ':4096:8' or ':4096:2:16:8'), got {config!r}")
    with pytest.raises(ValueError) as err:
        torch_cublas_workspace((9, 0), config)
    assert str(err.value) == message
    with pytest.raises(ValueError, match=re.escape(message)):
        actmem.training_memory(P, cublas_workspace_config=config)


def test_cublas_workspace_config_pairs_are_summed():
    KiB = 1024
    assert torch_cublas_workspace((9, 0), ":4096:8") == 4096 * KiB * 8
    assert torch_cublas_workspace((9, 0), ":4096:2:16:8") == 4096 * KiB * 2 + 16 * KiB * 8
    assert torch_cublas_workspace((9, 0), ":0:0") == 0
    assert torch_cublas_workspace((9, 0), ":2147483647:1") == (2**31 - 1) * KiB


# ------------------------------------------------------ kind 11: cp_comm_type

@pytest.mark.parametrize("value", [np.array("p2p"), np.array(["p2p"]), np.array(["p2p", "a2a"]),
                                   ["p2p"], ("p2p",), b"p2p", None, "P2P"])
@pytest.mark.parametrize("cp", [1, 2])
def test_cp_comm_type_is_checked_at_every_cp(value, cp):
    message = (f"cp_comm_type must be one of 'p2p', 'a2a', 'allgather', 'a2a+p2p', "
               f"got {value!r}")
    with pytest.raises(ValueError) as err:
        actmem.training_memory(P, cp=cp, cp_comm_type=value)
    assert str(err.value) == message


def test_valid_cp_comm_type_is_still_accepted_at_cp_1():
    base = actmem.training_memory(P).most_loaded.peak
    for value in ("p2p", "a2a", "allgather", np.str_("p2p")):
        assert actmem.training_memory(P, cp_comm_type=value).most_loaded.peak == base


# ------------------------------------------- kinds 13 and 20: the measure CLI

@pytest.fixture
def measure_cli():
    pytest.importorskip("torch", reason="the measure command needs PyTorch")
    from actmem.measure import __main__ as cli
    return cli


@pytest.mark.parametrize("argv, option, allowed", [
    (["--s", "100000000"], "--s", "1 to 4096"),
    (["--s", "0"], "--s", "1 to 4096"),
    (["--s", "1e3"], "--s", "1 to 4096"),
    (["--b", "-2"], "--b", "1 to 64"),
    (["--h", "9" * 5000], "--h", "1 to 4096"),
    (["--a", "100000"], "--a", "1 to 64"),
    (["--t", "1", "1000"], "--t", "1 to 8"),
    (["--b", "100000000", "fsdp"], "--b", "1 to 64"),  # checked before any subcommand
])
def test_measure_refuses_sizes_it_cannot_run(measure_cli, capsys, argv, option, allowed):
    with pytest.raises(SystemExit) as exit_:
        measure_cli.main(argv)
    assert exit_.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith(f"python -m actmem.measure: error: argument {option}: "
                            f"must be an integer from {allowed}, got ")


@pytest.mark.parametrize("sizes", [
    {"s": 4096, "b": 64}, {"s": 2048, "b": 2, "h": 4096, "a": 64}, {"h": 4096, "b": 64, "s": 512}])
def test_measure_refuses_a_layer_too_big_to_hold(measure_cli, capsys, sizes):
    argv = [x for key, value in sizes.items() for x in (f"--{key}", str(value))]
    with pytest.raises(SystemExit) as exit_:
        measure_cli.main(argv)
    assert exit_.value.code == 2
    full = {**measure_cli.SMALL, **sizes}
    held = measure_cli.layer_bytes(**full)
    assert held > measure_cli.LAYER_BYTES_MAX
    assert (f"error: argument --s/--b/--h/--a: the layer at s={full['s']}, b={full['b']}, "
            f"h={full['h']}, a={full['a']} holds {held / 2**30:.1f} GiB"
            in capsys.readouterr().err)


def test_measure_accepts_its_largest_sizes(measure_cli):
    parser = measure_cli.build_parser()
    args = parser.parse_args(["--s", "4096", "--t", "8", "1"])
    measure_cli.check_layer_size(parser, args)  # 0.6 GiB: allowed
    assert (args.s, args.t) == (4096, [8, 1])
    sbh = 32 * 2 * 64
    assert measure_cli.layer_bytes(32, 2, 64, 4) == sbh * (34 + 5 * 4 * 32 / 64) + 48 * 64**2


def test_measure_help_lists_every_subcommand(measure_cli):
    parser = measure_cli.build_parser()
    subcommands = next(action.choices for action in parser._actions
                       if hasattr(action, "add_parser"))
    assert list(subcommands) == ["pipeline", "step", "fsdp"]
    listed = "{" + ",".join(subcommands) + "}"
    assert listed in parser.format_usage()
    help_ = parser.format_help()
    assert help_.count(listed) == 2  # the usage and the positional arguments
    assert all(re.search(rf"^    {name} ", help_, re.M) for name in subcommands)
