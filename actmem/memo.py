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


def kept_by_repr(maxsize: int, keep=lambda result: True):
    """Decorate a pure function whose arguments and results are immutable:
    its last ``maxsize`` results are kept, by the ``repr`` of its
    arguments, and given back without calling it. A call that raises is
    not kept (it raises again); nor is a result ``keep`` refuses (say,
    one whose making warns, so that it warns each time); nor a call whose
    arguments cannot be printed (an integer of more than 4,300 digits).
    ``cache_clear()`` forgets them all."""
    def decorate(function):
        kept: OrderedDict = OrderedDict()

        @functools.wraps(function)
        def kept_function(*args, **kwargs):
            try:
                key = repr((args, sorted(kwargs.items())))
            except ValueError:  # too long to print: the function checks it
                return function(*args, **kwargs)
            if key in kept:
                kept.move_to_end(key)
                return kept[key]
            result = function(*args, **kwargs)
            if keep(result):
                kept[key] = result
                while len(kept) > maxsize:
                    kept.popitem(last=False)
            return result
        kept_function.cache_clear = kept.clear
        return kept_function
    return decorate
