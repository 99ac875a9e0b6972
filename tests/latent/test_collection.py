"""The examples ``gauntlet latent`` reads: a small sample covers every group, and the fit and held-out parts
share no text (nor the cases the shipped chaos score was fitted on)."""

from __future__ import annotations

from gauntlet.controllers.latent.collection import STUDY_DRAW, case_key, in_turn, part_of, suite_cases
from gauntlet.controllers.latent.hierarchy import hierarchy_suite


def test_items_are_taken_one_group_at_a_time_in_order_of_appearance():
    items = ["a1", "a2", "a3", "b1", "c1", "c2"]
    assert in_turn(items, lambda item: item[0], 5) == ["a1", "b1", "c1", "a2", "c2"]
    assert in_turn(items, lambda item: item[0], 100) == ["a1", "b1", "c1", "a2", "c2", "a3"]


def test_24_suite_texts_are_one_case_of_every_cell_and_more_extend_them():
    for part in ("fit", "held-out"):
        chosen = suite_cases(part, 24)
        assert len({(case.rule, case.channel, case.conflict) for case in chosen}) == 24
        assert suite_cases(part, 60)[:24] == chosen


def test_the_fit_and_held_out_parts_share_no_text_nor_the_shipped_scores_cases():
    share = sum(part_of(f"dataset/{i}") == "held-out" for i in range(2000)) / 2000
    assert 0.14 < share < 0.24  # 3 in 16
    fit, held = ({case_key(case) for case in suite_cases(part, 96)} for part in ("fit", "held-out"))
    assert len(fit) == len(held) == 96 and not fit & held
    assert not held & {case_key(case) for case in hierarchy_suite(**STUDY_DRAW)}
