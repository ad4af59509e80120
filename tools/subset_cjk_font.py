"""Build actmem/fonts/ActmemCJK-SC.otf: a subset of Noto Sans CJK SC.

Figures drawn under ``actmem.set_language("zh")`` need Chinese glyphs, and
matplotlib's own font has none. This keeps the 3,755 characters of GB 2312
level 1 (the commonly used hanzi), every Han character of actmem's Chinese
labels, and CJK punctuation; Latin text keeps matplotlib's DejaVu Sans (the
font is its fallback). Subsetting modifies the font, so the family is
renamed, as the SIL Open Font License 1.1 asks of modified versions.

Source: ``NotoSansCJKsc-Regular.otf`` (version 1.004, Adobe and Google, OFL
1.1), for example from the ``mplfonts`` wheel on PyPI::

    pip download --no-deps mplfonts==0.0.11 -d /tmp/mplfonts
    unzip -o /tmp/mplfonts/mplfonts-0.0.11-*.whl 'mplfonts/fonts/NotoSansCJKsc-Regular.otf' -d /tmp/mplfonts
    python tools/subset_cjk_font.py /tmp/mplfonts/mplfonts/fonts/NotoSansCJKsc-Regular.otf

Run it again whenever a Chinese label uses a character outside GB 2312
level 1 (``tests/test_language.py`` says which).
"""

import argparse
from pathlib import Path

from fontTools import subset
from fontTools.ttLib import TTFont

from actmem.language import FONT_FAMILY, FONT_FILE
from actmem.translations import ZH

PUNCTUATION = "".join(map(chr, range(0x3000, 0x3040))) + "".join(map(chr, range(0xFF01, 0xFF5F))) \
    + "·—…‘’“”"


def gb2312_level1() -> str:
    """The 3,755 hanzi of GB 2312 level 1 (rows 16-55)."""
    chars = []
    for row in range(0xB0, 0xD8):
        for cell in range(0xA1, 0xFF):
            try:
                chars.append(bytes([row, cell]).decode("gb2312"))
            except UnicodeDecodeError:
                pass
    return "".join(chars)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="NotoSansCJKsc-Regular.otf")
    args = parser.parse_args()
    labels = "".join(ZH.values())
    wanted = {c for c in gb2312_level1() + PUNCTUATION + labels if ord(c) > 0x2000}
    options = subset.Options()
    options.name_IDs = ["*"]
    options.layout_features = ["*"]
    options.desubroutinize = False
    font = TTFont(args.source)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(map(ord, wanted)))
    subsetter.subset(font)
    for record in font["name"].names:
        if record.nameID in (1, 4, 16):
            record.string = FONT_FAMILY
        elif record.nameID == 3:
            record.string = f"{FONT_FAMILY}; subset of NotoSansCJKsc-Regular 1.004"
        elif record.nameID == 6:
            record.string = FONT_FAMILY.replace(" ", "")
    FONT_FILE.parent.mkdir(exist_ok=True)
    font.save(FONT_FILE)
    print(f"{FONT_FILE}: {len(wanted)} characters, {FONT_FILE.stat().st_size} bytes")


if __name__ == "__main__":
    main()
