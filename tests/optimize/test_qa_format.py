"""The QA file format: every bad line reported with its number and reason, strict loading, and gold
documents found in a collection by doc id or by source."""

import json
import re

import dspy
import pytest

from optimize.errors import DataError
from optimize.qa_format import Catalog, check_qa_file, load_qa_file, parse_record, with_gold_refs


def write(tmp_path, lines, name="qa.jsonl"):
    path = tmp_path / name
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
                    encoding="utf-8")
    return path


def test_a_good_file_gives_items_with_defaults(tmp_path):
    path = write(tmp_path, [
        {"question": " How long is leave? ", "answers": ["16 weeks", "16 weeks"], "gold_sources": ["hr/leave.md"]},
        "",
        {"id": 7, "question": "年假有几天？", "answer": "十天"},
        {"id": "x", "question": "Who won?", "answers": [], "answerable": False},
    ])
    check = check_qa_file(path)
    assert check.problems == [] and check.lines == 3 and check.fatal() is None
    a, b, c = check.items
    assert (a.id, a.question, a.answers, a.gold_sources, a.language, a.line) == (
        "line-1", "How long is leave?", ("16 weeks",), ("hr/leave.md",), "en", 1)
    assert (b.id, b.answers, b.language, b.line) == ("7", ("十天",), "zh", 3)
    assert not c.answerable and c.record()["gold_doc_ids"] == [] and c.record()["answer"] == ""
    assert (check.answerable, check.with_gold) == (2, 1)
    assert a.group == parse_record({"question": "how long is LEAVE", "answers": []}, 9).group  # same question


def test_a_line_separator_inside_a_json_string_does_not_split_the_record(tmp_path):
    path = write(tmp_path, [json.dumps({"question": "How long\u2028is leave?", "answers": ["16\x85weeks"]},
                                       ensure_ascii=False)])
    check = check_qa_file(path)
    assert check.problems == [] and check.lines == 1 and check.items[0].answers == ("16\x85weeks",)


@pytest.mark.parametrize("line, reason", [
    ("{not json", "bad JSON"),
    ('["a list"]', "expected a JSON object"),
    ({"answers": ["x"]}, "missing 'question'"),
    ({"question": 3, "answers": ["x"]}, "'question' must be a string"),
    ({"question": "  ", "answers": ["x"]}, "'question' is blank"),
    ({"question": "q"}, "missing 'answers'"),
    ({"question": "q", "answers": "x"}, "'answers' must be a list of strings"),
    ({"question": "q", "answers": ["x", 2]}, "'answers'[1] must be a string"),
    ({"question": "q", "answers": [""]}, "'answers'[0] is blank"),
    ({"question": "q", "answers": ["x"], "gold_sources": "a.md"}, "'gold_sources' must be a list"),
    ({"question": "q", "answers": ["x"], "gold_doc_ids": [1]}, "'gold_doc_ids'[0] must be a string"),
    ({"question": "q", "answers": [], "answerable": True}, "'answerable' is true but 'answers' is empty"),
    ({"question": "q", "answers": ["x"], "answerable": "yes"}, "'answerable' must be true or false"),
    ({"question": "q", "answers": ["x"], "id": True}, "'id' must be a non-empty string or an integer"),
    ({"question": "q", "answers": ["x"], "language": ""}, "'language' must be a non-empty string"),
])
def test_every_kind_of_bad_line_is_reported_with_its_number(tmp_path, line, reason):
    path = write(tmp_path, [{"question": "fine", "answers": ["ok"]}, line])
    check = check_qa_file(path)
    assert len(check.items) == 1 and len(check.problems) == 1
    assert check.problems[0].line == 2 and reason in check.problems[0].reason
    with pytest.raises(DataError, match=f"line 2: .*{re.escape(reason)}"):
        load_qa_file(path)


def test_duplicate_ids_name_the_first_line(tmp_path):
    path = write(tmp_path, [{"id": "a", "question": "q1", "answers": ["x"]}, {"id": "b", "question": "q2", "answers": []},
                            {"id": "a", "question": "q3", "answers": ["y"]}, "{bad"])
    check = check_qa_file(path)
    assert [str(p) for p in check.problems] == ["line 3: duplicate id 'a' (first on line 1)",
                                                "line 4: bad JSON (Expecting property name enclosed in double quotes "
                                                "at column 2)"]
    with pytest.raises(DataError, match=r"line 3: duplicate id 'a' .*and 1 more.*selfrag data check"):
        load_qa_file(path)


def test_nothing_usable_is_fatal(tmp_path):
    empty = write(tmp_path, ["", "  "], "empty.jsonl")
    assert "is empty" in check_qa_file(empty).fatal()
    with pytest.raises(DataError, match="is empty"):
        load_qa_file(empty)
    junk = write(tmp_path, ["{", "[]"], "junk.jsonl")
    assert "none of its 2 line(s) is a usable QA record" in check_qa_file(junk).fatal()
    unanswerable = write(tmp_path, [{"question": "q", "answers": []}], "none.jsonl")
    assert "no answerable question" in check_qa_file(unanswerable).fatal()
    assert len(load_qa_file(unanswerable)) == 1  # evaluating on unanswerable questions is fine
    with pytest.raises(DataError, match="no answerable question"):
        load_qa_file(unanswerable, need_answerable=True)
    with pytest.raises(DataError, match="QA file not found"):
        check_qa_file(tmp_path / "missing.jsonl")


CHUNKS = [
    ("c1", {"source": "/home/u/docs/hr/leave.md"}), ("c2", {"source": "/home/u/docs/hr/leave.md"}),
    ("c3", {"source": "/home/u/docs/it/leave.md"}), ("c4", {"source": "/home/u/docs/pay.md"}),
    ("c5", {"source": "/data/items.jsonl", "doc_id": "p1"}), ("c6", {"source": "/data/items.jsonl", "doc_id": "p1"}),
]


def test_gold_documents_are_found_by_doc_id_or_by_any_trailing_part_of_the_source():
    cat = Catalog.from_chunks(CHUNKS)
    assert len(cat) == 6
    assert cat.sources_named("/home/u/docs/pay.md") == ["/home/u/docs/pay.md"]
    assert cat.sources_named("hr/leave.md") == ["/home/u/docs/hr/leave.md"]
    assert cat.sources_named("leave.md") == ["/home/u/docs/hr/leave.md", "/home/u/docs/it/leave.md"]
    assert cat.sources_named("eave.md") == [] and cat.sources_named("") == []
    assert cat.refs(["p1"]) == {"p1"}  # a chunk with a doc_id is cited by it
    assert cat.refs([], ["hr/leave.md"]) == {"c1", "c2"}
    assert cat.refs(["c4"]) == {"c4"} and cat.refs(["nope"], ["nope.md"]) == set()
    item = parse_record({"question": "q", "answers": ["a"], "gold_doc_ids": ["p1"], "gold_sources": ["pay.md"]}, 1)
    assert cat.gold_refs(item) == {"p1", "c4"}
    assert cat.gold_filters(item) == [{"doc_id": "p1"}, {"source": "/home/u/docs/pay.md"}]


def test_eval_examples_get_the_passage_ids_of_their_gold_documents():
    cat = Catalog.from_chunks(CHUNKS)
    ex = dspy.Example(question="q", answerable=True, gold_doc_ids=[], gold_sources=["pay.md"]).with_inputs("question")
    none = dspy.Example(question="r", answerable=False, gold_doc_ids=[]).with_inputs("question")
    out = with_gold_refs([ex, none], cat, "docs")
    assert out[0].gold_doc_ids == ["c4"] and out[1].gold_doc_ids == []
    stray = ex.copy(gold_sources=["elsewhere.md"])
    with pytest.raises(DataError, match="collection 'docs' holds none of the gold documents"):
        with_gold_refs([stray, none], cat, "docs")
