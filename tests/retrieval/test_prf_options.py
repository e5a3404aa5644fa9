"""The ``prf`` option is accepted and refused alike on every surface, before any model
loads: Python keyword arguments, a bot row, the HTTP body, the CLI, the adapters."""

from __future__ import annotations

from typing import Any

import pytest

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.bots.settings import validate_bot
from parrot_parents.errors import BotConfigError, ConfigurationError
from parrot_parents.integrations.langchain import ParentChildRetriever
from parrot_parents.integrations.llamaindex import ParentChildLlamaRetriever
from parrot_parents.retrieval.options import DEFAULTS, RetrievalOptions
from tests.cli.test_ask_question import _ask
from tests.retrieval.test_options import ROW, _http, _per_call

BAD = ["yes", "true", 1, 0, 1.0, [], {}]


def test_prf_is_off_by_default() -> None:
    assert DEFAULTS.prf is False
    assert RetrievalOptions().resolve().prf is False
    assert RetrievalOptions.from_overrides({"prf": True}).resolve().prf is True


@pytest.mark.parametrize("value", [True, False, *BAD])
def test_per_call_bot_row_and_http_agree(value: Any) -> None:
    try:
        row: str | None = str(validate_bot({**ROW, "prf": value}).prf)
    except BotConfigError:
        row = None
    assert {_per_call("prf", value), row, _http("prf", value)} == {
        None if value in BAD and not isinstance(value, bool) else str(value)
    }


@pytest.mark.parametrize("value", BAD)
async def test_python_refuses_a_bad_value_naming_the_option(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="prf: Input should be a valid boolean"):
        RetrievalOptions.from_overrides({"prf": value})
    with pytest.raises(ConfigurationError, match="prf"):
        Chatbot(prf=value)
    # No store: reaching the store would be another error, so the option was checked first.
    with pytest.raises(ConfigurationError, match="prf"):
        await Chatbot().retrieve("how am I paid?", prf=value)
    with pytest.raises(BotConfigError, match="prf"):
        validate_bot({**ROW, "prf": value})


def test_the_adapters_refuse_a_bad_value_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="prf: Input should be a valid boolean, got 'yes'"):
        ParentChildRetriever(bot=Chatbot(), prf="yes")
    with pytest.raises(ConfigurationError, match="prf: Input should be a valid boolean"):
        ParentChildLlamaRetriever(Chatbot(), prf="yes")  # type: ignore[arg-type]


def test_the_cli_refuses_a_value_for_the_flag_before_anything_loads() -> None:
    result, said = _ask(b"how am I paid?", "--prf=yes")
    assert result == {"code": 2, "heavy": []}, said
    assert "argument --prf/--no-prf: ignored explicit argument 'yes'" in said, said
