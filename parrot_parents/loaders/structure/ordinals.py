"""The number a heading carries itself: "Chapter 3" is 3, "Part IV" is 4, "Foreword" is 0.

:func:`section_ordinal` is what a ``{"section_ordinal": 3}`` filter matches, so "the third
chapter" finds the chapter numbered 3 whatever its position in the document (that position
is the row's ``ordinal``). Rules, tried in order:

1. a structural word followed by a number: ``Chapter 3``, ``Part IV``, ``Section twelve``,
   ``Book the Second`` is not understood (0);
2. a leading number: ``4. Pay``, ``4) Pay``, ``12 Angry Men`` (a bare leading integer),
   ``IV. Results`` (Roman numerals in capitals, followed by ``.``, ``)`` or ``:``), and for a
   dotted number the last part (``1.2.3 Scope`` is 3: the heading's own number, the
   parent's being in the parent heading);
3. a heading that is only a number (``III``, ``Seven``; Roman only in capitals);
4. otherwise 0 (``Foreword``, ``Introduction``, ``Appendix``).

Numbers may be Arabic, Roman (up to 3999) or English words up to ninety-nine, cardinal or
ordinal (``one``, ``third``, ``twenty-first``).
"""

from __future__ import annotations

import re

__all__ = ["parse_number", "section_ordinal"]

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19,
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6,
    "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12,
    "thirteenth": 13, "fourteenth": 14, "fifteenth": 15, "sixteenth": 16,
    "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
}  # fmt: skip
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
    "twentieth": 20, "thirtieth": 30, "fortieth": 40, "fiftieth": 50, "sixtieth": 60,
    "seventieth": 70, "eightieth": 80, "ninetieth": 90,
}  # fmt: skip
_ROMAN = re.compile(r"^M{0,3}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})$", re.IGNORECASE)
_ROMAN_VALUES = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}
_KEYWORDS = (
    "chapter|chap|ch|part|section|sect|sec|book|volume|vol|article|art|act|scene|lesson|"
    "unit|step|stage|phase|module|episode|canto|psalm|title|schedule|annex|clause|item|§"
)
_WORD = r"[A-Za-z]+(?:[- ][A-Za-z]+)?"
_KEYWORD_NUMBER = re.compile(
    rf"(?:^|\W)(?:{_KEYWORDS})\.?\s*(?:no\.?\s*)?(\d+(?:\.\d+)*|{_WORD})\b",
    re.IGNORECASE,
)
_LEADING_ARABIC = re.compile(r"^\s*(?:§\s*)?(\d+(?:\.\d+)*)(?:[.):]|\s|$)")
# Outside a structural word, Roman numerals count only in capitals ("Mix" is no 1009).
_LEADING_ROMAN = re.compile(r"^\s*([IVXLCDM]+)\s*[.):]")


def _roman(token: str) -> int | None:
    if not token or not _ROMAN.match(token):
        return None
    total, previous = 0, 0
    for ch in reversed(token.lower()):
        value = _ROMAN_VALUES[ch]
        total += -value if value < previous else value
        previous = max(previous, value)
    return total


def _words(token: str) -> int | None:
    parts = [p for p in re.split(r"[- ]+", token.lower()) if p]
    if len(parts) == 1:
        word = parts[0]
        return _UNITS.get(word, _TENS.get(word))
    if len(parts) == 2 and parts[0] in _TENS and parts[0].endswith("y"):
        unit = _UNITS.get(parts[1])
        if unit is not None and 1 <= unit <= 9:
            return _TENS[parts[0]] + unit
    return None


def parse_number(token: str) -> int | None:
    """An Arabic (``12``, ``1.2`` gives its last part), Roman (``XIV``) or word
    (``twelve``, ``twenty-first``) number; None when ``token`` is none of these."""
    token = token.strip().rstrip(".):")
    if not token:
        return None
    if re.fullmatch(r"\d+(?:\.\d+)*", token):
        return int(token.split(".")[-1])
    words = _words(token)
    if words is not None:
        return words
    return _roman(token)


def section_ordinal(heading: str) -> int:
    """The number in ``heading`` itself (module docstring); 0 when it has none.

    >>> section_ordinal("Chapter 3"), section_ordinal("Part IV"), section_ordinal("Foreword")
    (3, 4, 0)
    """
    text = " ".join(heading.split())
    if not text:
        return 0
    for found in _KEYWORD_NUMBER.finditer(text):
        token = found.group(1)
        value = parse_number(token)
        if (value is None and " " in token) or (value is None and "-" in token):
            value = parse_number(re.split(r"[- ]", token)[0])
        if value is not None:
            return value
    leading = _LEADING_ARABIC.match(text)
    if leading:
        return int(leading.group(1).split(".")[-1])
    leading = _LEADING_ROMAN.match(text)
    if leading:
        value = _roman(leading.group(1))
        if value is not None:
            return value
    whole = parse_number(text)
    if whole is None or (_roman(text.rstrip(".):")) is not None and not text.isupper()):
        return 0
    return whole
