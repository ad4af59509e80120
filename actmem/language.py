"""The language of figure and widget labels: English (the default) or Chinese.

The Chinese notebooks (``notebooks/zh/``) run the same code as the English
ones plus one line in their set-up cell, ``actmem.set_language("zh")``.
From then on figures draw their titles, axis labels, legends and notes in
Chinese, explorers built afterwards label their controls and readouts in
Chinese, and what the notebooks print goes through the same catalog
(:mod:`actmem.views.printed`; the printed helpers of :mod:`actmem.views`
take this language by default). The numbers never change, and the
readouts' ``value`` (what notebooks and tests assert on) and the errors
actmem raises stay English.

Labels are looked up in :data:`actmem.translations.ZH`, keyed by the English
label or template (``tr("GPU {gpu}").format(gpu=0)``). Chinese figures need
Chinese glyphs, which matplotlib's own font lacks: :func:`set_language`
registers the font shipped in ``actmem/fonts/`` (a subset of Noto Sans CJK
SC, SIL Open Font License 1.1) as the fallback of matplotlib's own font, and
any Chinese system font after it for characters outside the subset.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .validate import lists_keywords, shown

LANGUAGES = ("en", "zh")
"""Languages offered: English and Simplified Chinese."""
FONT_FILE = Path(__file__).parent / "fonts" / "ActmemCJK-SC.otf"
"""The Chinese font: GB 2312 level 1 and every Han character of the labels."""
FONT_FAMILY = "Actmem CJK SC"
"""Its family name, as matplotlib knows it once registered."""
SYSTEM_CJK_FAMILIES = ("Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Micro Hei",
                       "Microsoft YaHei", "PingFang SC", "Heiti SC", "SimHei")
"""Chinese fonts an operating system may have (Linux, Windows, macOS):
those installed follow :data:`FONT_FAMILY`, so a character outside its
subset (a user's title with 昇 or 熵, traditional characters) still draws."""

_current = {"language": "en"}


@lists_keywords
def set_language(language: str) -> None:
    """Draw figure and widget labels in ``language`` from now on.

    Args:
        language: ``"en"`` or ``"zh"`` (Simplified Chinese). ``"zh"`` also
            registers the Chinese font with matplotlib as the fallback of
            its usual font (:func:`use_chinese_font`), so Latin text looks
            as before and Han characters come from it.

    Raises:
        ValueError: ``language`` is not one of :data:`LANGUAGES`.
    """
    if not isinstance(language, str) or language not in LANGUAGES:  # no array compared
        raise ValueError(f"language={shown(language)} is not offered; choose one of "
                         f"{', '.join(map(repr, LANGUAGES))}")
    if language == "zh":
        use_chinese_font()
    _current["language"] = language


def get_language() -> str:
    """The language labels are drawn in now: ``"en"`` or ``"zh"``."""
    return _current["language"]


def use_chinese_font() -> None:
    """Register :data:`FONT_FILE` with matplotlib and append it to
    ``rcParams["font.family"]``, followed by the installed ones of
    :data:`SYSTEM_CJK_FAMILIES`: matplotlib takes each glyph from the first
    family in that list that has it, so Latin text keeps the usual font,
    Han characters come from the bundled one, and a character outside its
    subset from a system font if there is one (idempotent). Only installed
    families are listed, so matplotlib logs no "font not found", and a
    family of one weight serves bold text too. Imports matplotlib."""
    from matplotlib import font_manager, rcParams

    installed = {f.name for f in font_manager.fontManager.ttflist}
    if FONT_FAMILY not in installed:
        font_manager.fontManager.addfont(str(FONT_FILE))
    wanted = [FONT_FAMILY, *(f for f in SYSTEM_CJK_FAMILIES if f in installed)]
    for family in wanted:
        _let_regular_serve_bold(family)
    rcParams["font.family"] = [*rcParams["font.family"],
                               *(f for f in wanted if f not in rcParams["font.family"])]


def _let_regular_serve_bold(family: str) -> None:
    """A family of one weight (the bundled font; WenQuanYi Micro Hei) serves
    bold text with its regular face, as matplotlib would anyway, without
    matplotlib logging "Failed to find font weight bold" (3.11 logs it on
    every figure with a bold label, which nbval reads as a changed output)."""
    from matplotlib import font_manager

    faces = [f for f in font_manager.fontManager.ttflist if f.name == family]
    weights = [font_manager.weight_dict.get(f.weight, f.weight) for f in faces]
    if faces and max(weights) < 700:
        font_manager.fontManager.ttflist.append(dataclasses.replace(faces[0], weight=700))


def english(text: str) -> str:
    """The English label: ``text`` itself."""
    return text


def chinese(text: str) -> str:
    """The Chinese label for ``text``, or ``text`` when the catalog has none
    (a name a notebook passed in, say)."""
    from .translations import ZH

    return ZH.get(text, text)


def translator(language: str | None = None):
    """The function that translates labels into ``language`` (default: the
    current one): :func:`english` or :func:`chinese`."""
    return chinese if (language or get_language()) == "zh" else english


def tr(text: str) -> str:
    """``text`` (an English label or format template) in the current language."""
    return translator()(text)
