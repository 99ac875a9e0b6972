"""The realised utility of a branch: U_a = w*success - c_a - s*steps, U_quit = u_quit."""

from __future__ import annotations

import pytest

from gauntlet.controllers.oversight.utility import ACTIONS, INTERVENTIONS, REVISIONS, UtilityConfig, recompute


def test_defaults_are_the_papers():
    config = UtilityConfig()
    assert (config.w, config.c_intervene, config.c_continue, config.s, config.u_quit) == (1.0, 0.05, 0.0, 0.01, 0.0)
    assert set(INTERVENTIONS) < set(ACTIONS) and "continue" in ACTIONS and "quit" in ACTIONS


def test_continue_pays_steps_only_and_interventions_pay_their_cost_too():
    config = UtilityConfig()
    assert config.utility("continue", True, 10) == pytest.approx(1.0 - 0.1)
    assert config.utility("continue", False, 7) == pytest.approx(-0.07)
    for action in ("expert", "expert_k", "rollback", "stronger"):  # the paper's ladder: c_intervene each
        assert config.utility(action, True, 10) == pytest.approx(1.0 - 0.05 - 0.1)
        assert config.utility(action, False, 3) == pytest.approx(-0.05 - 0.03)
    # Ours: a hint and a confirmation cost less than a handover, each its own price.
    assert config.utility("hint", True, 10) == pytest.approx(1.0 - 0.02 - 0.1)
    assert UtilityConfig(c_confirm=0.004).utility("confirm", False, 3) == pytest.approx(-0.004 - 0.03)
    assert set(INTERVENTIONS) == {"expert", "expert_k", "rollback", "stronger", *REVISIONS}


def test_quit_is_u_quit_whatever_the_outcome():
    config = UtilityConfig(u_quit=-0.2)
    assert config.utility("quit", False, 0) == -0.2
    assert config.utility("quit", True, 40) == -0.2


def test_every_price_is_configurable():
    config = UtilityConfig(w=2.0, c_intervene=0.5, c_continue=0.1, s=0.1)
    assert config.utility("continue", True, 2) == pytest.approx(2.0 - 0.1 - 0.2)
    assert config.utility("expert", True, 2) == pytest.approx(2.0 - 0.5 - 0.2)


def test_unknown_actions_and_bad_ladder_settings_are_refused():
    with pytest.raises(ValueError, match="unknown overseer action"):
        UtilityConfig().utility("pray", True, 1)
    with pytest.raises(ValueError, match="k"):
        UtilityConfig(k=0)
    with pytest.raises(ValueError, match="r"):
        UtilityConfig(r=0)


def test_recompute_reprices_rows_from_success_and_steps_without_touching_the_input():
    rows = [{"t": 0, "branches": {"continue": {"success": True, "steps": 10, "utility": 0.9},
                                  "expert": {"success": False, "steps": 4, "utility": -0.09},
                                  "quit": {"success": False, "steps": 0, "utility": 0.0}}}]
    config = UtilityConfig(s=0.0, c_intervene=0.3, u_quit=0.25)
    repriced = recompute(rows, config)
    assert {a: b["utility"] for a, b in repriced[0]["branches"].items()} == pytest.approx(
        {"continue": 1.0, "expert": -0.3, "quit": 0.25})
    assert rows[0]["branches"]["continue"]["utility"] == 0.9
    assert repriced[0]["t"] == 0
