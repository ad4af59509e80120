"""What a notebook prints, in the language it set (:mod:`actmem.language`).

The Chinese notebooks run the same code as the English ones; what they print
goes through these helpers, so that a learner reads every label, table header,
verdict and explanation in the notebook's language while the numbers stay
exactly the same. In English they print what ``print`` and an f-string would,
byte for byte.

- :func:`translate` is :func:`actmem.language.tr` that also knows the
  timeline's event labels (``'loss of micro-batch 0'``) and the messages of
  :data:`actmem.translations.MESSAGES` (errors, measured explanations),
  whose values it reads back out of the English text.
- :func:`say` is ``print`` whose string arguments are labels: each is
  translated (a string the catalog does not know, a number or a size such
  as ``'912 MiB'`` is printed as it is), and so are the strings in a list,
  tuple, set or dict it is given.
- :func:`fmt` is ``str.format`` on a translated template whose string
  fields are labels too (``{name}``; ``{name!r}`` and ``{name!s}`` keep the
  value as it is: a code name), padded by display width, so that a column
  of Chinese labels (two columns per character in a monospaced font) lines
  up as the English one does.

>>> fmt("{name:<8}|", name="fixed")
'fixed   |'
>>> fmt("{option!r}: {n:>4} MiB", option="full", n=48)
"'full':   48 MiB"
"""

from __future__ import annotations

import re
import string
import sys
import unicodedata
from functools import lru_cache

from ..language import english, get_language, tr, translator

__all__ = ["event_label", "fmt", "listing", "message", "pad", "row_name", "say", "translate",
           "width"]

FULL_WIDTH_PUNCTUATION = "：；，、。！？（）“”‘’《》【】"
"""Chinese punctuation: :func:`say` puts no space beside it (Chinese
typography leaves none), so ``say("总计：", "912 MiB")`` reads ``总计：912 MiB``."""


def width(text: str) -> int:
    """Columns ``text`` takes in a monospaced font: two for a wide or
    full-width character (Han characters, full-width punctuation), one for
    others, none for a combining mark.

    >>> width("MiB"), width("固定项"), width("总计：")
    (3, 6, 6)
    """
    return sum(0 if unicodedata.combining(c) else
               2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def pad(text: str, columns: int, align: str = "<") -> str:
    """``text`` padded with spaces to ``columns`` display columns
    (:func:`width`), aligned left (``"<"``), right (``">"``) or centred
    (``"^"``); longer text is returned whole, as ``format`` does.

    >>> pad("固定项", 8, ">") + "|"
    '  固定项|'
    """
    return format(text, f"{align}{max(columns + len(text) - width(text), 0)}")


# ------------------------------------------------------------------ translation

_NAME = re.compile(r"micro-batch (\d+)(?:, chunk (\d+))?")


def event_label(label: str, tr=english) -> str:
    """An :class:`actmem.Event`'s label in the language of ``tr``: the
    micro-batch (and chunk) it names is put into the translated template,
    e.g. ``'loss of micro-batch 3'`` -> ``'微批次 3 的损失'``. A label the
    catalog lacks comes back as it is."""
    found = _NAME.search(label)
    if found is None:
        return tr(label)
    i, chunk = found.groups()
    name = (tr("micro-batch {i}, chunk {c}").format(i=i, c=chunk) if chunk is not None
            else tr("micro-batch {i}").format(i=i))
    template = _NAME.sub("{name}", label)
    translated = tr(template)
    return label if translated == template else translated.format(name=name)


@lru_cache(maxsize=None)
def _pattern(template: str) -> tuple[re.Pattern, tuple[str, ...]]:
    """A regular expression that reads ``template``'s fields back out of a
    text it produced, and the fields' names in order."""
    parts, names = [], []
    for literal, name, _, _ in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if name is not None:
            parts.append("(.+?)")
            names.append(name)
    return re.compile("".join(parts) + r"\Z", re.S), tuple(names)


def message(text: str, tr=None) -> str:
    """``text`` translated by the first template of
    :data:`actmem.translations.MESSAGES` that produces it, its fields
    (translated by ``tr``, default the current language, where the catalog
    has them) put into the Chinese template; ``text`` itself when none does
    or the language is English."""
    tr = translator() if tr is None else tr
    if tr is english:
        return text
    from ..translations import MESSAGES

    for english_template, chinese_template in MESSAGES.items():
        pattern, names = _pattern(english_template)
        found = pattern.match(text)
        if found:
            values = {n: tr(v) for n, v in zip(names, found.groups())}
            return chinese_template.format(**values)
    return text


def translate(text, tr=None) -> str:
    """``text`` (a string or an exception) in the current language (or
    ``tr``'s): a label of the catalog, an event of the timeline
    (:func:`event_label`) or a message of :data:`actmem.translations.MESSAGES`;
    anything else as it is. In English, ``str(text)``."""
    text = str(text)
    tr = translator() if tr is None else tr
    if tr is english:
        return text
    for step in (tr, lambda t: event_label(t, tr), lambda t: message(t, tr)):
        translated = step(text)
        if translated != text:
            return translated
    return text


def listing(items) -> str:
    """Labels joined as a list: ``'a, b, c'`` in English, ``'甲、乙、丙'`` in
    Chinese (the enumeration comma), each translated."""
    return ("、" if get_language() == "zh" else ", ").join(translate(i) for i in items)


# ------------------------------------------------------------------ printing

_WIDTH = re.compile(r"^(?P<head>(?:.?[<>=^])?[+\- ]?z?#?0?)(?P<width>\d+)(?P<tail>.*)$", re.S)


class _Formatter(string.Formatter):
    """``str.format`` whose plain string fields are translated labels padded
    by display width (see :func:`fmt`)."""

    def convert_field(self, value, conversion):
        if conversion == "c":
            return _as_code(value)
        if conversion == "o":   # an option's value (see fmt)
            return value if _is_number(value) else str(value)
        if conversion is None and isinstance(value, str):
            return translate(value)
        if conversion is None and get_language() == "zh" and (
                value is None or isinstance(value, bool) or type(value) is dict
                or _is_listing(value)):
            return _chinese(value)
        return super().convert_field(value, conversion)

    def format_field(self, value, format_spec):
        if isinstance(value, str):
            match = _WIDTH.match(format_spec)
            if match:
                columns = max(int(match["width"]) + len(value) - width(value), 0)
                format_spec = f"{match['head']}{columns}{match['tail']}"
        return format(value, format_spec)


_FORMATTER = _Formatter()


def fmt(template: str, /, *args, **fields) -> str:
    """``tr(template).format(*args, **fields)``, with every plain string field
    translated (:func:`translate`) and padded to its width in display columns
    (:func:`pad`); ``{x!r}`` and ``{x!s}`` keep the value untranslated, as a
    code name. In Chinese a bool, None, dict or list field reads as :func:`say`
    prints it (是/否, 无, ``t=8, p=2``, ``甲、乙``); a field written as an
    option's value (right after ``name=``, as in ``"sequence_parallel={sp}"``)
    reads as code instead, the value as ``print`` prints it in English
    (``sequence_parallel=False``, ``recompute_modules=['mlp']``); a field
    converted with ``!c`` reads as code too, a list or tuple of names joined
    by ``, `` (``selective``). Numbers are formatted as ``str.format``
    formats them.

    >>> fmt("sequence_parallel={sp}: {n} MiB", sp=False, n=80)
    'sequence_parallel=False: 80 MiB'
    """
    template = tr(template)
    if get_language() == "zh":
        template = _OPTION_FIELD.sub(r"\1{\2!o\3}", template)
    return _FORMATTER.vformat(template, args, fields)


_OPTION_FIELD = re.compile(r"(?<![\w{])([A-Za-z_]\w*=)\{(\w*)((?::[^{}!]*)?)\}")
"""A field right after ``name=`` with no conversion: an option's value, printed as code."""


def _as_code(value):
    """A field converted with ``!c``: a number as it is (its format spec
    applies), a list or tuple of names joined by ``, `` in Chinese, anything
    else as ``print`` prints it."""
    if _is_number(value):
        return value
    if get_language() == "zh" and type(value) in (list, tuple) and value and all(
            isinstance(x, str) for x in value):
        return ", ".join(value)
    return str(value)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_listing(value) -> bool:
    """A list, tuple or set of labels, or a list or set of numbers (not bools;
    a tuple of numbers is a shape and keeps its parentheses): printed as a
    list in Chinese (:func:`listing`)."""
    kind = type(value)
    return kind in (list, tuple, set, frozenset) and bool(value) and (
        all(isinstance(x, str) for x in value)
        or (kind is not tuple and all(_is_number(x) for x in value)))


def _said(value) -> str:
    """What :func:`say` prints for ``value``: a string or an exception
    translated; in Chinese also a bool as 是/否, None as 无, options (a dict
    keyed by names of :class:`actmem.Job` and :class:`actmem.ModelConfig`
    fields) as the keyword arguments that set them (``t=8, sequence_parallel=True``), a dict keyed
    by labels as ``标签：值`` pairs (``；`` between them where a value is a list),
    a list, tuple or set of labels and a list or set of numbers as a list
    (:func:`listing`: ``2944 MiB、736 MiB``; a tuple of numbers, a shape,
    keeps its parentheses); anything else as ``print`` prints it."""
    if isinstance(value, (str, BaseException)):
        return translate(value)
    if get_language() == "en":
        return str(value)
    return _chinese(value)


_ANSWER = {True: "是", False: "否", None: "无"}
"""A bool or None printed on its own in Chinese (it answers a question)."""


@lru_cache(maxsize=None)
def _option_names() -> frozenset:
    """The fields of a Job and of a ModelConfig: the options a learner types."""
    from dataclasses import fields

    from ..run.job.job import Job
    from ..run.job.model import ModelConfig
    return frozenset(f.name for cls in (Job, ModelConfig) for f in fields(cls))


def _chinese(value) -> str:
    if value is None or isinstance(value, bool):
        return _ANSWER[value]
    if type(value) is dict:
        if all(isinstance(k, str) and k in _option_names() for k in value):
            return ", ".join(f"{k}={v!r}" for k, v in value.items())   # options, as code
        pairs = [f"{translate(k)}：{_said(v)}" for k, v in value.items()]
        nested = any("，" in p or "、" in p for p in pairs)   # a value is itself a list
        return ("；" if nested else "，").join(pairs)
    if _is_listing(value) or (type(value) in (list, tuple, set, frozenset) and not value):
        return listing(sorted(value) if isinstance(value, (set, frozenset)) else value)
    return str(value)


def say(*values, sep: str = " ", end: str = "\n", file=None, flush: bool = False) -> None:
    """``print(*values)``, each string translated (:func:`translate`: a label
    the catalog has becomes the notebook's language; any other string, a
    number, is printed as ``print`` prints it), and the strings inside a list,
    tuple, set or dict too. No space is put beside Chinese punctuation
    (:data:`FULL_WIDTH_PUNCTUATION`), so ``say("ledger agrees:", True)``
    prints ``账本与公式一致：是`` in Chinese and ``ledger agrees: True`` in
    English. In Chinese a dict that follows a label ending in a word comes
    after a colon: ``say("loss of micro-batch 0", parts)`` prints
    ``微批次 0 的损失：权重：...``."""
    texts = [_said(v) for v in values]
    out = texts[:1]
    for before, value, text in zip(texts, values[1:], texts[1:]):
        tight = (before[-1:] in FULL_WIDTH_PUNCTUATION or text[:1] in FULL_WIDTH_PUNCTUATION)
        if sep == " " and type(value) is dict and _names_it(before):
            out.append("：" + text)   # a label, then what it holds
            continue
        out.append(("" if tight and sep == " " else sep) + text)
    print("".join(out), end=end, file=sys.stdout if file is None else file, flush=flush)


def _names_it(text: str) -> bool:
    """``text`` (Chinese) ends in a word (a Han character, a letter or a
    digit): a label that what follows it belongs to."""
    return get_language() == "zh" and bool(text.strip()) and (
        text[-1:].isalnum() or bool(re.match(r"[\u3400-\u9fff]", text[-1:])))


def row_name(row) -> str:
    """A ledger row (:class:`actmem.layer.ledger.Row`, or a measured
    comparison's row) as a printed table names it: its key
    (``qkv_input``) in English, its name in the current language in
    Chinese (``QKV 投影的输入``), as the ledger's figures draw it."""
    return row.key if get_language() == "en" else translate(row.name)
