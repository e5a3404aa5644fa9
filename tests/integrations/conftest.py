"""A small handbook ingested into PostgreSQL, for the framework adapters."""

from __future__ import annotations

from langchain_core.documents import Document

PAY = (
    "Salaries are paid twice a month, on the 15th and on the last business day. "
    "All pay is made by direct deposit into an account in your name.\n\n"
    "Overtime is paid in the following pay cycle, once the coordinator has signed off "
    "the hours, at one and a half times the hourly rate."
)
LEAVE = (
    "Every employee earns 1.5 vacation days per month of service. Up to five unused days "
    "carry over into the next year; the rest lapse on 31 March.\n\n"
    "Sick leave needs a doctor's note after three consecutive days away."
)


def handbook() -> list[Document]:
    return [
        Document(page_content=PAY, metadata={"document_id": "pay", "source": "pay.md"}),
        Document(page_content=LEAVE, metadata={"document_id": "leave", "source": "leave.md"}),
    ]
