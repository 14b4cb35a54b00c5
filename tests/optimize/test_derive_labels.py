"""The text operations of the training-data builder: answer spans, the claim a passage does not back,
partial answers and answers with one fact changed (deterministic, nothing invented from nowhere)."""

from optimize.derive_labels import (
    changed_answer,
    evidence_sentence,
    holds_answer,
    partial_answer,
    sentences,
    unbacked_claim,
)

GOLD = "# Zephyr bridge\n\nThe Zephyr bridge opened in 1931. It was designed by Marta Kovac. It spawns nothing."
OTHER = "The Zephyr tunnel was dug in 1964 by the city council. Trams use the bridge, while cars use the tunnel."


def test_sentences_leave_out_headings_and_split_at_line_breaks():
    assert sentences(GOLD) == ["The Zephyr bridge opened in 1931.", "It was designed by Marta Kovac.",
                               "It spawns nothing."]
    assert sentences("第一句。第二句！") == ["第一句。", "第二句！"]


def test_a_passage_holds_an_answer_as_whole_words_or_most_content_words():
    assert holds_answer(GOLD, "1931") == (True, 1.0)
    assert holds_answer("It opened in 19311.", "1931")[0] is False  # whole words only
    held, overlap = holds_answer(GOLD, "Designed by Marta Kovac in 1931")
    assert held and overlap == 1.0
    assert holds_answer(OTHER, "Marta Kovac designed it")[0] is False
    assert evidence_sentence(GOLD, "Marta Kovac") == "It was designed by Marta Kovac."


def test_a_number_of_the_answer_must_be_in_the_passage():
    assert holds_answer("Employees get 12 weeks of paid parental leave.", "16 weeks") == (False, 0.5)
    assert holds_answer("Since 2019, employees get 16 weeks of paid leave.", "16 weeks") == (True, 1.0)


def test_a_chinese_answer_is_held_by_its_characters_not_by_whole_words():
    assert holds_answer("根据员工手册，员工可享受十六周的带薪产假。", "十六周") == (True, 1.0)  # no spaces in Chinese
    assert holds_answer("食堂由索迪斯公司经营。", "十六周") == (False, 0.0)
    assert holds_answer("员工可享受十二周的带薪产假。", "十六周") == (False, 0.667)  # 十 and 周, not 六
    assert evidence_sentence("食堂由索迪斯公司经营。员工可享受十六周的带薪产假。", "十六周") == "员工可享受十六周的带薪产假。"


def test_the_extra_claim_of_a_partial_answer_is_a_sentence_the_gold_passage_does_not_back():
    claim = unbacked_claim(OTHER, GOLD, "1931")
    assert claim == "The Zephyr tunnel was dug in 1964 by the city council."  # shares only "zephyr" (1 of 6)
    assert unbacked_claim(GOLD, GOLD, "1931") is None  # every sentence is backed
    assert partial_answer("1931", claim) == "1931. " + claim
    assert partial_answer("It opened in 1931.", claim) == "It opened in 1931. " + claim


def test_a_changed_answer_shifts_a_stated_number_or_swaps_a_stated_name():
    number = changed_answer("It opened in 1931.", GOLD, OTHER, key="q1")
    assert number.kind == "number" and number.old == "1931" and number.new != "1931"
    assert number.new not in GOLD and number.answer == f"It opened in {number.new}."
    assert changed_answer("It opened in 1931.", GOLD, OTHER, key="q1") == number  # same input, same change
    name = changed_answer("Marta Kovac designed it.", GOLD, "Design was by Ivo Brandt and Lena Holm.", key="q2")
    assert name.kind == "name" and name.old == "Marta Kovac" and name.new in ("Ivo Brandt", "Lena Holm")
    assert name.claim == name.answer
    month = changed_answer("It spawns in October.", "It spawns in October.", "", key="q3")
    assert month.kind == "name" and month.new in "January February March April May June July August September "\
                                                  "November December".split()
    assert changed_answer("silver blue", "A silver blue fish.", OTHER, key="q4") is None  # nothing to change
    assert changed_answer("It opened in 1931.", "No year here.", OTHER, key="q5") is None  # not stated: no change
    assert changed_answer("Anglers need it.", "Anglers need it.", "Fishers want it.", key="q6") is None
