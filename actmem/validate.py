"""Input checks shared by the memory model, the CLI and the widgets.

Every check raises ``TypeError`` (wrong kind of value) or ``ValueError``
(right kind, not allowed) with a message that names the argument, the value
it got and what is allowed, so that a learner never meets a traceback from
deep inside a library or a silently wrong number.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import operator


MAX_INT_DIGITS = 4000
"""Most digits an integer argument may have: below Python's limit of 4,300
for turning an integer into text, so every message can print it."""
_TOO_LARGE = 10**MAX_INT_DIGITS  # made once: building it costs 0.1 ms, every check used it


def shown(value: object) -> str:
    """``repr(value)`` for a message, or a description when Python refuses
    to print it (an integer of more than 4,300 digits, or a list of them)."""
    try:
        return repr(value)
    except ValueError:
        size = f" of {value.bit_length()} bits" if isinstance(value, int) else ""
        return f"<a {type(value).__name__}{size}, too long to print>"


def integer(name: str, value: object, kind: str = "an integer") -> int:
    """``value`` as a plain ``int``: an ``int`` or anything with
    ``__index__`` (NumPy integer scalars); bools, arrays (0-d ones too:
    they have ``__index__`` but stay arrays in arithmetic), floats and the
    rest are refused. ``kind`` says what was expected, for the message.

    Raises:
        TypeError: ``{name} must be {kind}, got ...``.
        ValueError: more than :data:`MAX_INT_DIGITS` digits.
    """
    try:
        if type(value).__name__ in ("bool", "bool_", "ndarray"):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be {kind}, got {shown(value)} "
                        f"({type(value).__name__})") from None
    if abs(number) >= _TOO_LARGE:
        raise ValueError(f"{name} must have at most {MAX_INT_DIGITS} digits, got "
                         f"{shown(number)}")
    return number


def plain(value: object) -> object:
    """A NumPy integer or float scalar as Python's ``int`` or ``float``
    (so that records and results hold plain numbers); anything else,
    NumPy bools and arrays included, unchanged for the checks to judge."""
    kind = type(value)
    if kind in (int, float, bool, str) or kind.__name__ in ("bool", "bool_", "ndarray"):
        return value
    if hasattr(kind, "__index__"):
        return operator.index(value)
    return float(value) if isinstance(value, float) else value


def plain_fields(record) -> None:
    """Replace each NumPy scalar in the dataclass ``record``'s fields by
    :func:`plain`'s number (in ``__post_init__``, before the checks)."""
    for field in dataclasses.fields(record):
        value = getattr(record, field.name)
        if plain(value) is not value:
            object.__setattr__(record, field.name, plain(value))


def lists_keywords(function):
    """Decorate ``function`` (or a class's ``__init__``) so that an unknown
    keyword argument raises a ``TypeError`` that lists the keywords it takes
    (Python's own message names only the unknown one), and NumPy scalars
    arrive as Python's numbers (:func:`plain`: ``np.uint8(4) * 1024``
    overflows in NumPy's arithmetic)."""
    known = tuple(name for name in inspect.signature(function).parameters if name != "self")

    @functools.wraps(function)
    def checked(*args, **kwargs):
        unknown = [name for name in kwargs if name not in known]
        if unknown:
            raise TypeError(f"{function.__qualname__.removesuffix('.__init__')}() got "
                            f"unknown keyword argument"
                            f"{'s' * (len(unknown) > 1)} {', '.join(unknown)}; "
                            f"it takes {', '.join(known)}")
        return function(*map(plain, args), **{k: plain(v) for k, v in kwargs.items()})
    return checked


def instance(name: str, value: object, kind: type, example: str):
    """Return ``value`` if it is a ``kind``; otherwise a ``TypeError`` that
    names the argument, what was given and an ``example`` of what fits."""
    if not isinstance(value, kind):
        article = "an" if kind.__name__[0] in "AEIOU" else "a"
        raise TypeError(f"{name} must be {article} {kind.__name__} (e.g. {example}), "
                        f"got {shown(value)} ({type(value).__name__})")
    return value


def positive_int(name: str, value: object) -> int:
    """``value`` as a plain ``int`` if it is an integer >= 1 (see
    :func:`integer`).

    Raises:
        TypeError: ``value`` is not an integer.
        ValueError: ``value`` is < 1.
    """
    number = integer(name, value, "a positive integer")
    if number < 1:
        raise ValueError(f"{name} must be a positive integer (>= 1), got {number}")
    return number


def non_negative_int(name: str, value: object) -> int:
    """``value`` as a plain ``int`` if it is an integer >= 0 (see :func:`integer`).

    Raises:
        TypeError: ``value`` is not an integer.
        ValueError: ``value`` is < 0.
    """
    number = integer(name, value, "an integer >= 0")
    if number < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {number}")
    return number


def optional(check, name: str, value: object):
    """``None``, or ``check(name, value)`` (e.g. :func:`positive_int`)."""
    return None if value is None else check(name, value)


def one_of_ints(name: str, value: object, allowed: tuple[int, ...]) -> int:
    """``value`` as a plain ``int`` if it is one of ``allowed``: 4.0, a
    bool or an array is refused, not compared (``4.0 in (2, 4)`` is True)."""
    number = integer(name, value, f"one of {', '.join(map(str, allowed))} (an int)")
    if number not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(str, allowed))}, got {number}")
    return number


def compute_capability(name: str, value: object) -> tuple[int, int] | None:
    """``None`` (an AMD GPU) or a GPU's compute capability as a pair of
    integers >= 0, e.g. ``(9, 0)``."""
    if value is None:
        return None
    if not isinstance(value, tuple) or len(value) != 2:
        raise TypeError(f"{name} must be a pair such as (9, 0) or None, got {shown(value)}")
    return (non_negative_int(f"{name}[0]", value[0]), non_negative_int(f"{name}[1]", value[1]))


def finite_number(name: str, value: object, *, positive: bool = False,
                  allowed: str = "") -> int | float:
    """``value`` if it is an int or a float (not a bool), finite and ``>= 0``
    (``> 0`` when ``positive``); a huge int counts as finite (no float
    conversion, which would overflow). ``allowed`` replaces the message's
    ``"a finite number >= 0"``.

    Raises:
        ValueError: anything else (the message names ``name`` and the value).
    """
    bad = (isinstance(value, bool) or not isinstance(value, (int, float))
           or (isinstance(value, float) and not math.isfinite(value))
           or value < 0 or (positive and value == 0))
    if bad:
        allowed = allowed or f"a finite number {'>' if positive else '>='} 0"
        raise ValueError(f"{name} must be {allowed}, got {shown(value)}")
    return value


def flag(name: str, value: object) -> bool:
    """Return ``value`` if it is a ``bool``; raise ``TypeError`` otherwise."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {shown(value)}")
    return value


def choice(name: str, value: object, allowed: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``allowed`` (strings; an array or
    any other non-string is refused); raise ``ValueError`` otherwise."""
    if not isinstance(value, str) or value not in allowed:
        options = ", ".join(repr(option) for option in allowed)
        raise ValueError(f"{name} must be one of {options}, got {shown(value)}")
    return value  # type: ignore[return-value]


def common_divisors(*numbers: int, **named_numbers: int) -> list[int]:
    """All positive integers that divide every one of ``numbers``, ascending.
    Numbers given by keyword are called by their keyword in messages
    (``common_divisors(a=52, h=6656)``), the others ``numbers[i]``.

    >>> common_divisors(52, 6656)
    [1, 2, 4, 13, 26, 52]

    Raises:
        TypeError, ValueError: no numbers, or one is not a positive int.
        ValueError: their greatest common divisor has a factor that
            :func:`prime_factors` cannot split within its budget (e.g.
            ``(2**61 - 1) * (2**89 - 1)``); the message names the numbers
            and lists the divisors it found.
    """
    named = {**{f"numbers[{i}]": n for i, n in enumerate(numbers)}, **named_numbers}
    if not named:
        raise TypeError("common_divisors needs at least one positive integer")
    named = {key: positive_int(key, n) for key, n in named.items()}
    found, complete = _known_divisors(math.gcd(*named.values()))
    if not complete:
        raise ValueError(f"cannot list the divisors of {_named(named)}: "
                         f"{_unfactored(named)}; divisors found: "
                         f"{', '.join(map(str, found))}")
    return found


def divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending, from its prime factors
    (:func:`prime_factors`: fast even for a 61-bit prime).

    >>> divisors(6656)[:8]
    [1, 2, 4, 8, 13, 16, 26, 32]

    Raises:
        TypeError, ValueError: as :func:`prime_factors`.
    """
    return _from_powers(prime_factors(n))


_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)

_PRIME_TEST_BITS = 2048
"""Widest number :func:`_is_prime` is asked about (13 modular powers of
2048 bits take milliseconds; of 13,000 bits, a minute): a wider number
left after trial division stays unfactored."""

RHO_BUDGET = 2**18
"""Pollard-rho steps one factorization may take (each step a modular
squaring and a multiplication; a number wider than 128 bits pays one step
per 128 bits): enough to split off a prime factor below about 2^32 (the
search takes about sqrt(p) steps), in a fraction of a second."""


def _is_prime(n: int) -> bool:
    """Miller-Rabin with the first 13 primes as bases: exact below 3.3 x 10^24
    (Sorenson and Webster 2015), a strong test above."""
    if n < 2:
        return False
    for p in _BASES:
        if n % p == 0:
            return n == p
    d, r = n - 1, 0
    while d % 2 == 0:
        d, r = d // 2, r + 1
    for base in _BASES:
        x = pow(base, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True


def _factor(n: int, budget: list[int]) -> int | None:
    """A non-trivial factor of the odd composite ``n``, or None once
    ``budget[0]`` steps are spent (it is decreased in place): Pollard's rho
    with Brent's cycle detection, the gcd taken once per 128 steps
    (Brent 1980, "An improved Monte Carlo factorization algorithm")."""
    cost = 1 + n.bit_length() // 128
    for c in range(1, n):
        x = y = ys = 2
        d, product, length = 1, 1, 1
        while d == 1:
            budget[0] -= 2 * length * cost  # this round's steps, paid before they are taken
            if budget[0] < 0:
                return None
            x = y
            for _ in range(length):
                y = (y * y + c) % n
            done = 0
            while done < length and d == 1:
                ys, batch = y, min(128, length - done)
                for _ in range(batch):
                    y = (y * y + c) % n
                    product = product * abs(x - y) % n
                d = math.gcd(product, n)
                done += batch
            length *= 2
        if d == n:  # the batch overshot: step through it one at a time
            d = 1
            while d == 1:
                ys = (ys * ys + c) % n
                d = math.gcd(abs(x - ys), n)
        if d != n:
            return d
    return None  # unreachable for composites


def _factorize(n: int) -> tuple[dict[int, int], dict[int, int]]:
    """``({prime: power}, {unsplit factor: power})`` for the integer
    ``n >= 1``: trial division by the primes below 1000, then Miller-Rabin
    and Pollard's rho (:data:`RHO_BUDGET` steps in all) for what remains.
    The unsplit factors are those the budget or :data:`_PRIME_TEST_BITS`
    left composite or unknown; their product times the primes' is ``n``."""
    factors: dict[int, int] = {}
    for p in range(2, 1000):
        while n % p == 0:
            factors[p] = factors.get(p, 0) + 1
            n //= p
    left: dict[int, int] = {}
    stack, budget = ([n] if n > 1 else []), [RHO_BUDGET]
    while stack:
        m = stack.pop()
        if m.bit_length() <= _PRIME_TEST_BITS and _is_prime(m):
            factors[m] = factors.get(m, 0) + 1
            continue
        d = _factor(m, budget) if m.bit_length() <= _PRIME_TEST_BITS else None
        if d is None:
            left[m] = left.get(m, 0) + 1
        else:
            stack += [d, m // d]
    return dict(sorted(factors.items())), left


def prime_factors(n: int) -> dict[int, int]:
    """``{prime: power}`` for the integer ``n >= 1``: trial division by the
    primes below 1000, then Miller-Rabin and Pollard's rho for what remains,
    within :data:`RHO_BUDGET` steps.

    Raises:
        TypeError, ValueError: ``n`` is not a positive int.
        ValueError: ``n`` has a factor the budget cannot split (two primes
            of more than about 10 digits each, or a part wider than 2048 bits).
    """
    named = {"n": positive_int("n", n)}
    factors, left = _factorize(named["n"])
    if left:
        raise ValueError(f"cannot factor {_named(named)}: {_unfactored(named)}")
    return factors


def _from_powers(powers: dict[int, int]) -> list[int]:
    """Every product of the factors in ``{factor: power}``, ascending."""
    found = [1]
    for factor, power in powers.items():
        found = [d * factor**e for d in found for e in range(power + 1)]
    return sorted(set(found))


def _known_divisors(n: int) -> tuple[list[int], bool]:
    """(divisors of ``n`` found, whether that is all of them): the products
    of the prime factors :func:`_factorize` finds; all of them when nothing
    is left unsplit."""
    factors, left = _factorize(n)
    return _from_powers(factors), not left


def _named(named: dict[str, int]) -> str:
    """``"a=52 and h=6656"`` for a message."""
    return " and ".join(f"{key}={shown(value)}" for key, value in named.items())


def _unfactored(named: dict[str, int]) -> str:
    """Why the divisors of ``named``'s numbers' gcd cannot all be listed."""
    whose = ("it has" if len(named) == 1
             else f"their greatest common divisor {shown(math.gcd(*named.values()))} has")
    return (f"{whose} a factor with no prime factor below 1000 that cannot be split "
            f"quickly (Pollard's rho, {RHO_BUDGET} steps, on factors up to "
            f"{_PRIME_TEST_BITS} bits)")


def divides(name: str, value: int, **targets: int) -> int:
    """Check that ``value`` (argument ``name``) divides every named target.

    The message lists the values that would be allowed, e.g. for a=52,
    h=6656, t=8: ``t=8 must divide a=52 and h=6656; valid t: 1, 2, 4, 13,
    26, 52``. Where the targets' greatest common divisor G cannot be
    factored quickly (:func:`prime_factors`), the list holds the divisors
    found and ends ``and other divisors of G``.

    Raises:
        ValueError: some target is not a multiple of ``value`` (or, then,
            is not a positive int).
    """
    if all(target % value == 0 for target in targets.values()):
        return value
    common = math.gcd(*(positive_int(key, target) for key, target in targets.items()))
    found, complete = _known_divisors(common)
    valid = ", ".join(map(str, found)) + ("" if complete else
                                          f" and other divisors of {shown(common)}")
    raise ValueError(f"{name}={value} must divide {_named(targets)}; valid {name}: {valid}")
