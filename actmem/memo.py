"""Results of pure functions of frozen values, kept by their arguments as printed.

Many parts of the memory model ask for the same layer or the same ledger
rows again and again within one ``training_memory``, and an explorer asks
again at every control change (issue 19: readouts within 1.5x of a no-op
round trip). :func:`kept_by_repr` keeps such results. Its key is the
``repr`` of the arguments, not their hash: ``True == 1`` and ``2 == 2.0``
in Python, yet a layer given ``t=True`` must be refused, not served the
layer built for ``t=1``.
"""

from __future__ import annotations

import functools
from collections import OrderedDict

from .validate import plain


def kept_by_repr(maxsize: int, skip=lambda *args, **kwargs: False):
    """Decorate a pure function whose arguments and results are immutable:
    its last ``maxsize`` results are kept, by the ``repr`` of its
    arguments, and given back without calling it. Not kept: a call that
    raises (it raises again), a call ``skip`` (given the same arguments)
    marks (say, one that warns, so that it warns each time), a call whose
    arguments cannot be printed (an integer of more than 4,300 digits)."""
    def decorate(function):
        kept: OrderedDict = OrderedDict()

        @functools.wraps(function)
        def kept_function(*args, **kwargs):
            try:
                key = repr((args, sorted(kwargs.items())))
            except ValueError:  # too long to print: the function checks it
                key = None
            if key is None or skip(*args, **kwargs):
                return function(*args, **kwargs)
            if key in kept:
                kept.move_to_end(key)
                return kept[key]
            result = kept[key] = function(*args, **kwargs)
            while len(kept) > maxsize:
                kept.popitem(last=False)
            return result
        return kept_function
    return decorate


def warns_at_t1(model, t, sequence_parallel, *args, **kwargs) -> bool:
    """Whether a layer asked for with these arguments warns that sequence
    parallelism does nothing at t = 1 (:data:`actmem.layer.config.SP_AT_T1`):
    a ``skip`` of :func:`kept_by_repr` for functions of a model, t and
    sequence_parallel that build that layer."""
    t = plain(t)
    return sequence_parallel is True and type(t) is int and t == 1
