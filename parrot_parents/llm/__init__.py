"""The LLM answer: an OpenAI-compatible chat-completions client and the prompt."""

from parrot_parents.llm.client import ChatCompletion, ChatCompletionsClient, LLMSettings
from parrot_parents.llm.prompt import SYSTEM_PROMPT, Answer, build_messages

__all__ = [
    "SYSTEM_PROMPT",
    "Answer",
    "ChatCompletion",
    "ChatCompletionsClient",
    "LLMSettings",
    "build_messages",
]
