"""A reply carries the states its decoding kept: through the agent's LangGraph checkpoint unchanged, on its
episode record in memory but never into the episode file, and by layer numbers from either end."""

from __future__ import annotations

import numpy as np
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from gauntlet.agents.llm.kept_states import ReplyStates, carry_states, with_states
from gauntlet.agents.llm.records import message_of, message_record
from gauntlet.episode import Step


def carrying(rows: np.ndarray, text: str = "7") -> AIMessage:
    states = ReplyStates("transformers:/m@cpu", 3, {2: rows})
    return AIMessage(content=text, response_metadata=with_states({"model_name": "m"}, states))


def test_a_replys_states_come_back_bit_identical_from_the_agents_checkpoint():
    rows = np.random.default_rng(0).normal(size=(5, 8)).astype(np.float32)
    serde = InMemorySaver().serde
    [back] = serde.loads_typed(serde.dumps_typed([carrying(rows)]))
    states = ReplyStates.of(back)
    assert states is not None and states.source == "transformers:/m@cpu"
    np.testing.assert_array_equal(states.layer(2), rows)
    assert states.layer(2).dtype == np.float32 and states.layer(-1) is states.layer(2) is not None
    assert states.layer(1) is None and ReplyStates.of(AIMessage(content="7")) is None
    # Messages carrying states compare as messages do (the arrays travel as bytes).
    assert back == carrying(rows) and back != carrying(rows + 1)


def test_a_record_carries_its_replys_states_in_memory_and_never_writes_them():
    rows = np.ones((2, 4), dtype=np.float32)
    reply = carrying(rows)
    record = carry_states(message_record(reply), reply)
    step = Step(index=0, messages=[record])
    carried = ReplyStates.of(step.messages[0])
    assert carried is not None and np.array_equal(carried.layer(2), rows)
    assert "hidden_states" not in step.model_dump_json() and "_reply_states" not in step.model_dump_json()
    assert ReplyStates.of(Step.model_validate_json(step.model_dump_json()).messages[0]) is None
    # Neither the record nor the message read back from it is changed otherwise.
    assert message_of(record) == message_of(message_record(reply))
    assert ReplyStates.of(carry_states(message_record(AIMessage(content="7")), AIMessage(content="7"))) is None
