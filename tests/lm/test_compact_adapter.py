"""CompactJSONAdapter: evidence first, one shared system message, far fewer tokens than JSONAdapter."""

from __future__ import annotations

import dspy

from selfrag.lm.compact_adapter import OUTPUT_MARK, SYSTEM, TASK_MARK, CompactJSONAdapter
from signatures import GenerateAnswer, GradeRelevance, JudgeSupport

INPUTS = {"question": "How far does the Heron go?", "passages": "[1] «The Heron rides 80 km.»"}


def _messages(adapter, signature, inputs, demos=()):
    return adapter.format(signature, list(demos), inputs)


def test_system_message_is_shared_by_every_signature():
    adapter = CompactJSONAdapter()
    systems = {_messages(adapter, sig, {"question": "q", "passage": "p", "passages": "p", "answer": "a"})[0]["content"]
               for sig in (GradeRelevance, GenerateAnswer, JudgeSupport)}
    assert systems == {SYSTEM}


def test_evidence_comes_first_and_the_task_last():
    msgs = _messages(CompactJSONAdapter(), JudgeSupport, {**INPUTS, "answer": "80 km"})
    user = msgs[-1]["content"]
    assert user.index("[[ ## passages ## ]]") < user.index("[[ ## question ## ]]") < user.index("[[ ## answer ## ]]")
    task = user[user.index(TASK_MARK):]
    assert JudgeSupport.instructions.split("\n")[0] in task
    assert OUTPUT_MARK in task and '`support`: "fully" | "partially" | "no"' in task


def test_field_descriptions_and_types_are_kept():
    user = _messages(CompactJSONAdapter(), GenerateAnswer, INPUTS)[-1]["content"]
    assert "`citations`: list of int — numbers of the passages the answer relies on" in user
    assert "`answerable`: true | false" in user


def test_an_object_output_names_its_keys():
    # A backend without schema-constrained decoding (json_object mode) must learn the keys from the prompt.
    from signatures import GradeRelevanceBatch

    user = _messages(CompactJSONAdapter(), GradeRelevanceBatch, INPUTS)[-1]["content"]
    assert '`verdicts`: list of {number: int, topic: string, relevance: "relevant" | "irrelevant"}' in user


def test_much_shorter_than_json_adapter():
    def size(adapter):
        return sum(len(m["content"]) for m in _messages(adapter, GradeRelevance, {"question": "q", "passage": "p"}))

    assert size(CompactJSONAdapter()) < 0.6 * size(dspy.JSONAdapter())


def test_demos_are_turns_without_the_task_block_and_parse_is_json():
    adapter = CompactJSONAdapter()
    demo = {"question": "q1", "passage": "p1", "passage_topic": "t", "relevance": "relevant"}
    msgs = _messages(adapter, GradeRelevance, {"question": "q", "passage": "p"}, demos=[demo])
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert TASK_MARK not in msgs[1]["content"] and TASK_MARK in msgs[3]["content"]
    assert adapter.parse(GradeRelevance, '{"passage_topic": "x", "relevance": "irrelevant"}')["relevance"] == "irrelevant"
