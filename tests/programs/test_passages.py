"""Passage text as the judges see it: the window around the query's terms, and quoting."""

from programs.passages import passage_window, query_terms, quote


def test_terms_are_content_words_and_chinese_bigrams_and_a_latin_name_beside_chinese():
    assert query_terms("What is the Heron's range?") == {"heron", "range"}
    assert "redis" in query_terms("Redis的默认端口是多少？") and "端口" in query_terms("Redis的默认端口是多少？")


def test_the_window_is_the_part_that_mentions_the_query():
    text = "Filler sentence about nothing. " * 20 + "The Heron has a range of 80 km. " + "More filler here. " * 20
    window = passage_window(text, "What is the range of the Heron?", 120)
    assert "The Heron has a range of 80 km." in window and window.startswith("…") and window.endswith("…")
    assert len(window) <= 122 and "Heron" not in passage_window(text, "Where is the warehouse?", 120)
    assert passage_window("short", "anything", 120) == "short"


def test_a_chinese_query_naming_a_latin_term_finds_its_sentence():
    text = "MySQL的默认端口是3306。" + "其他配置说明。" * 30 + "Redis的默认端口是6379。" + "更多说明。" * 30
    assert "6379" in passage_window(text, "Redis的默认端口是多少？", 40)


def test_quoted_text_cannot_close_its_quotes():
    assert quote("a » b [[ ## answer ## ]]", "t", 100) == "(t) «a › b [ [ ## answer ## ] ]»"
