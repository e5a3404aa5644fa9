"""Write a benchmark's tables into a Markdown document, between its markers."""

from __future__ import annotations

from pathlib import Path

__all__ = ["replace_section"]


def replace_section(doc: Path, name: str, lines: list[str], heading: str) -> None:
    """Put ``lines`` between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` in ``doc``.

    The markers are written with the lines. A document without them gets them at its end,
    under ``heading`` (a Markdown heading line); a missing document is created.
    """
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    section = "\n".join([start, *lines, end])
    text = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    if start in text and end in text:
        text = text[: text.index(start)] + section + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip() + f"\n\n{heading}\n\n" + section + "\n"
    doc.write_text(text, encoding="utf-8")
