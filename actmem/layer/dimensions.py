"""The sizes of one layer that tensor parallelism splits, and the MLP width a
layer gets by default: the divisibility rules :class:`actmem.LayerConfig`
checks and the widgets offer (values of t that divide them)."""

from __future__ import annotations

from ..validate import choice, common_divisors, lists_keywords, positive_int

ACTIVATIONS = ("gelu", "swiglu", "squared_relu")
"""MLP activation functions the ledger knows how to count: GeLU (the paper),
SwiGLU (gated) and squared ReLU (Megatron-LM's ``--squared-relu``,
``megatron/core/activations.py``: ``torch.pow(F.relu(x), 2)``)."""


@lists_keywords
def default_ffn_hidden_size(h: int, activation: str = "gelu") -> int:
    """The MLP inner width f a layer gets when ``ffn_hidden_size`` is not given.

    GeLU and squared ReLU: 4h (the paper, sec. 4.1; Megatron-LM's
    ``arguments.py`` for any ungated MLP). SwiGLU: Megatron-LM's default,
    ``int(4h * 2/3 / 64) * 64`` (``megatron/training/arguments.py``): two
    input projections of width 2/3 of 4h keep the parameter count of a
    4h GeLU MLP, rounded down to a multiple of 64. Computed exactly as
    ``8h // 192 * 64``.

    >>> default_ffn_hidden_size(1280, "swiglu"), default_ffn_hidden_size(4096, "swiglu")
    (3392, 10880)

    Raises:
        TypeError, ValueError: ``h`` is not a positive integer or
            ``activation`` is unknown; SwiGLU with h < 24, where the rule
            gives 0 (pass ``ffn_hidden_size``).
    """
    h = positive_int("h", h)  # a plain int: 4 * np.int32 wraps around
    if choice("activation", activation, ACTIVATIONS) != "swiglu":
        return 4 * h
    f = 8 * h // 192 * 64
    if f == 0:
        raise ValueError(f"activation='swiglu' with h={h}: Megatron-LM's default width "
                         "int(4h*2/3/64)*64 is 0 for h < 24; pass ffn_hidden_size")
    return f


def split_dimensions(h: int, a: int, s: int | None = None, kv_heads: int | None = None,
                     ffn_hidden_size: int | None = None, activation: str = "gelu"
                     ) -> dict[str, int]:
    """The sizes tensor parallelism splits t ways, by argument name: a and h
    always, kv_heads when given, the MLP width f as ``ffn_hidden_size``
    when given or for SwiGLU's default (:func:`default_ffn_hidden_size`;
    GeLU's 4h needs no check), s under sequence parallelism (pass
    ``s`` only then). One rule for :class:`LayerConfig` and
    :func:`valid_tensor_parallel_sizes`.

    Raises:
        TypeError, ValueError: a size is not a positive integer, a does
            not divide h, or ``activation`` is unknown.
    """
    choice("activation", activation, ACTIVATIONS)
    dims = {"a": positive_int("a", a), "h": positive_int("h", h)}
    if h % a:
        raise ValueError(f"h={h} must be divisible by a={a} "
                         "(each head gets h/a hidden units)")
    if ffn_hidden_size is None and activation == "swiglu":
        ffn_hidden_size = default_ffn_hidden_size(h, activation)
    for name, value in (("kv_heads", kv_heads), ("ffn_hidden_size", ffn_hidden_size),
                        ("s", s)):
        if value is not None:
            dims[name] = positive_int(name, value)
    return dims


@lists_keywords
def valid_tensor_parallel_sizes(h: int, a: int, s: int | None = None, *,
                                kv_heads: int | None = None,
                                ffn_hidden_size: int | None = None,
                                activation: str = "gelu") -> list[int]:
    """Values of t that :class:`LayerConfig` accepts, ascending (choices for
    widgets): the common divisors of a and h, of kv_heads when given, and
    of the MLP width f (``ffn_hidden_size``, or SwiGLU's default). Pass
    ``s`` when sequence parallelism is on: then t must divide s too (each
    rank keeps s/t positions, sec. 4.2.2).

    >>> valid_tensor_parallel_sizes(6656, 52)
    [1, 2, 4, 13, 26, 52]
    >>> valid_tensor_parallel_sizes(6656, 52, s=2048)
    [1, 2, 4]
    >>> valid_tensor_parallel_sizes(5120, 40, ffn_hidden_size=13824)
    [1, 2, 4, 8]
    >>> valid_tensor_parallel_sizes(1280, 20, activation="swiglu")  # f = 3392
    [1, 2, 4]

    Raises:
        TypeError, ValueError: as :func:`split_dimensions`; or, as
            :func:`actmem.common_divisors`, sizes whose common divisors
            cannot be found quickly (the message names them).
    """
    return common_divisors(**split_dimensions(h, a, s, kv_heads, ffn_hidden_size,
                                              activation))
