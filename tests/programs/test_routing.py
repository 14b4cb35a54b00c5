"""Plain-function routing of SelfRAG's retrieval loop."""

import pytest

from programs.routing import route_after_grading


@pytest.mark.parametrize("relevant,rewrites,web_rounds,max_web,not_stated,on_web,expected", [
    (2, 0, 0, 1, False, False, "generate"),
    (0, 0, 0, 1, False, False, "rewrite"),   # missed the topic: rewrite first
    (0, 2, 0, 1, False, False, "web"),       # rewrites spent (max 2)
    (2, 0, 0, 1, True, False, "web"),        # on topic, answer not stated: no rewrite
    (0, 2, 1, 1, False, False, "abstain"),
    (0, 0, 1, 2, False, True, "rewrite"),    # a web round left: the rewritten query is searched there
    (0, 0, 1, 1, False, True, "abstain"),    # none left: a rewrite would never be searched
])
def test_route_after_grading(relevant, rewrites, web_rounds, max_web, not_stated, on_web, expected):
    assert route_after_grading(relevant, rewrites, 2, web_rounds, max_web, True, not_stated=not_stated,
                               on_web=on_web) == expected
