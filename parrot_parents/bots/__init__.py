"""Bots: the query pipeline (search, rerank, expand) behind a chatbot."""

from parrot_parents.bots.abstract import AbstractBot
from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.bots.passages import Hit, Passage
from parrot_parents.bots.vector_context import Retrieval, VectorContextMixin

__all__ = ["AbstractBot", "Chatbot", "Hit", "Passage", "Retrieval", "VectorContextMixin"]
