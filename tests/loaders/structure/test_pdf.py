from __future__ import annotations

import pytest

from parrot_parents.errors import DocumentReadError
from parrot_parents.loaders.structure.pdf import read_pdf

fpdf = pytest.importorskip("fpdf")


def make_pdf(chapters: list[tuple[str, str]], *, outline: bool = True) -> bytes:
    """A small PDF written with fpdf2: one page per chapter, bookmarks when ``outline``."""
    pdf = fpdf.FPDF()
    pdf.set_font("helvetica", size=12)
    pdf.set_title("Staff Handbook")
    for title, body in chapters:
        pdf.add_page()
        if outline:
            pdf.start_section(title)
        pdf.cell(text=title, new_x="LMARGIN", new_y="NEXT")
        pdf.multi_cell(0, 10, text=body)
    return bytes(pdf.output())


CHAPTERS = [
    ("Chapter 1: Pay", "You are paid twice a month, on the 15th and the last business day."),
    ("Chapter 2: Leave", "Vacation accrues at 1.25 days for each full month worked."),
]


def test_run_pages_and_outline_headings() -> None:
    text, s = read_pdf(make_pdf(CHAPTERS))
    assert s.reader == "pdf" and s.title == "Staff Handbook"
    assert len(s.pages) == 2
    assert "paid twice a month" in text[s.pages[0][0] : s.pages[0][1]]
    assert "Vacation accrues" in text[s.pages[1][0] : s.pages[1][1]]
    assert [(h.level, h.title) for h in s.headings] == [(1, t) for t, _ in CHAPTERS]
    assert [text[h.start : h.end] for h in s.headings] == [t for t, _ in CHAPTERS]
    assert s.headings[1].start >= s.pages[1][0]


def test_pdf_without_outline_has_pages_but_no_headings() -> None:
    text, s = read_pdf(make_pdf(CHAPTERS, outline=False))
    assert s.headings == () and len(s.pages) == 2 and "Vacation" in text


def test_not_a_pdf_is_a_read_error() -> None:
    with pytest.raises(DocumentReadError, match="not a readable PDF"):
        read_pdf(b"hello, I am not a PDF")
