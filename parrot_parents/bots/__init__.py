"""Bots: a retriever plus an optional LLM answer, configured in code or by a ``bots`` row."""

from parrot_parents.bots.abstract import AbstractBot
from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.retrieval.passages import Hit, Passage
from parrot_parents.retrieval.pipeline import Retrieval

__all__ = ["AbstractBot", "Chatbot", "Hit", "Passage", "Retrieval"]
