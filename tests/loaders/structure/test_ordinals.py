from __future__ import annotations

import pytest

from parrot_parents.loaders.structure.ordinals import parse_number, section_ordinal


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("Chapter 3", 3),
        ("CHAPTER XII. The Storm", 12),
        ("Part IV", 4),
        ("Part one", 1),
        ("Chapter Three", 3),
        ("Chapter Twenty-One: Home", 21),
        ("Section twelve", 12),
        ("Book the Second", 0),
        ("4. Pay and Payroll", 4),
        ("4) Pay", 4),
        ("1.2.3 Scope", 3),
        ("IV. Results", 4),
        ("III", 3),
        ("Seven", 7),
        ("Foreword", 0),
        ("Introduction", 0),
        ("Appendix A", 0),
        ("I Love Lucy", 0),
        ("Mix", 0),  # not the Roman 1009: Roman numerals alone only in capitals
        ("Act I, Scene 2", 1),
        ("", 0),
    ],
)
def test_section_ordinal(heading: str, expected: int) -> None:
    assert section_ordinal(heading) == expected


@pytest.mark.parametrize(
    ("token", "expected"),
    [("12", 12), ("1.2", 2), ("XIV", 14), ("mcmxcix", 1999), ("twenty-first", 21),
     ("ninth", 9), ("IIII", None), ("banana", None), ("", None)],
)  # fmt: skip
def test_parse_number(token: str, expected: int | None) -> None:
    assert parse_number(token) == expected
