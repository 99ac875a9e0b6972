"""Oversight controllers deployed through the runner on the corridor, whose optimal action has a closed form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gauntlet.controllers.oversight.benchmarks.basic import CorridorBenchmark, corridor_expected_utilities
from gauntlet.controllers.oversight.benchmarks import get_benchmark
from gauntlet.controllers.oversight.controller import (
    ONLINE_ACTIONS,
    OversightController,
    ScalarRoutingController,
    online_utility,
    overseer_choices,
)
from gauntlet.controllers.oversight.models import (
    ActionConditioned,
    RiskScore,
    ScalarRouter,
    TwoThresholdRouter,
    design_matrix,
    failure_data,
    save_model,
    utility_data,
)
from gauntlet.controllers.oversight.protocol import collect_episode
from gauntlet.controllers.oversight.utility import LADDER, UtilityConfig
from gauntlet.episode import Episode, load_episodes
from gauntlet.hooks import Controller
from gauntlet.runner import rollout

CONFIG = UtilityConfig()
ONLINE = tuple(action for action in ONLINE_ACTIONS if action in LADDER)
"""The corridor's online actions: all but the revisions (its agent writes no reply to revise)."""
TRAIN_EPISODES = range(200)
HELD_OUT = range(1000, 1030)


@pytest.fixture(scope="module")
def corridor() -> CorridorBenchmark:
    benchmark = get_benchmark("corridor")
    assert isinstance(benchmark, CorridorBenchmark)
    return benchmark


@pytest.fixture(scope="module")
def training_rows(corridor: CorridorBenchmark) -> list[dict[str, Any]]:
    return [row for episode in TRAIN_EPISODES for row in collect_episode(corridor, episode, actions=ONLINE)]


@pytest.fixture(scope="module")
def model_path(training_rows: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = ActionConditioned("rf", seed=0).fit(*utility_data(training_rows))
    return save_model(tmp_path_factory.mktemp("model") / "corridor.joblib", model, utility=CONFIG,
                      benchmark="corridor")


def save_router(router: ScalarRouter | TwoThresholdRouter, folder: Path) -> Path:
    return save_model(folder / "router.joblib", router, utility=CONFIG, benchmark="corridor")


def closed_form(corridor: CorridorBenchmark, *, position: int, t: int, lapse_rate: float) -> dict[str, float]:
    """The exact expected utility of each online action (rollback is not among them, so its cell is unused)."""
    utilities = corridor_expected_utilities(position=position, back_position=position, t=t, lapse_rate=lapse_rate,
                                            length=corridor.length, max_steps=corridor.max_steps, config=CONFIG)
    return {action: utilities[action] for action in ONLINE}


def position_before(episode: Episode, t: int) -> int:
    return 0 if t == 0 else int(episode.steps[t - 1].observation)


def overseen(corridor: CorridorBenchmark, controller: Controller, episode: int, folder: Path) -> Episode:
    """Episode ``episode`` under ``controller``, recorded to a file and read back from it."""
    path = folder / f"episode-{episode}.jsonl"
    getattr(controller, "for_episode", lambda episode: None)(episode)  # the episode's stronger agent
    rollout(corridor.make_env(episode), corridor.make_agent(episode), seed=corridor.episode_seed(episode),
            hooks=[controller], record=path)
    (loaded,) = load_episodes(path)
    return loaded


def test_the_trained_controller_recovers_the_closed_form_optimal_action_on_held_out_prefixes(
        corridor: CorridorBenchmark, model_path: Path) -> None:
    controller = OversightController(model_path)
    rows = [row for episode in HELD_OUT for row in collect_episode(corridor, episode, actions=("continue",))]
    X, _ = design_matrix(rows, controller.model.feature_names)
    chosen = controller.model.choose(X, allowed=controller.allowed)
    exact = [closed_form(corridor, position=int(row["features"]["position"]), t=row["t"],
                         lapse_rate=row["features"]["lapse_rate"]) for row in rows]
    best = [max(u, key=u.__getitem__) for u in exact]
    assert np.mean([a == b for a, b in zip(chosen, best)]) >= 0.8
    # In expected utility its choices lose less than any fixed policy's, the best one chosen in hindsight.
    regret = np.mean([max(u.values()) - u[a] for u, a in zip(exact, chosen)])
    fixed = min(np.mean([max(u.values()) - u[action] for u in exact]) for action in ONLINE)
    assert regret < fixed


def test_deployed_through_the_runner_it_changes_actions_and_the_file_records_why(
        corridor: CorridorBenchmark, model_path: Path, tmp_path: Path) -> None:
    controller = OversightController(model_path)
    assert isinstance(controller, Controller)
    agree, replaced = [], 0
    for episode_index in HELD_OUT:
        episode = overseen(corridor, controller, episode_index, tmp_path)
        for step in episode.steps:
            decisions = [e for e in step.events if e.kind == "decision" and e.source == "oversight"]
            assert len(decisions) == 1  # one decision before every step, on disk
            interventions = [e for e in step.events if e.kind == "intervention"]
            for event in interventions:
                assert event.data["intervention"] == "replace_action"
                replaced += event.data["original_action"] != step.action
        for t, action in overseer_choices(episode):
            decision_scores = next(e.data["scores"] for s in episode.steps for e in s.events
                                   if e.kind == "decision" and e.data["scores"]["t"] == t)
            assert {f"utility:{a}" for a in ONLINE} <= set(decision_scores)
            exact = closed_form(corridor, position=position_before(episode, t), t=t,
                                lapse_rate=corridor.lapse_rate(episode_index))
            agree.append(action == max(exact, key=exact.__getitem__))
    assert replaced > 0  # the expert's action differed from the agent's proposal, and the step took the expert's
    assert np.mean(agree) >= 0.75


def test_online_features_are_the_features_of_the_protocols_rows(
        corridor: CorridorBenchmark, training_rows: list[dict[str, Any]], tmp_path: Path) -> None:
    # A router that never intervenes leaves the base episode as the protocol ran it.
    never = ScalarRouter(RiskScore("logistic").fit(*failure_data(training_rows)), threshold=np.inf)
    controller = ScalarRoutingController(save_router(never, tmp_path))
    seen: dict[int, dict[str, float]] = {}
    features = controller.features

    def spy(prefix: Any) -> dict[str, float]:
        seen[len(prefix.steps)] = features(prefix)
        return seen[len(prefix.steps)]

    controller.features = spy  # type: ignore[method-assign]
    episode = overseen(corridor, controller, 7, tmp_path)
    rows = collect_episode(corridor, 7, actions=("continue",))
    assert len(rows) == len(episode.steps) and {row["t"] for row in rows} <= set(seen)
    for row in rows:
        assert seen[row["t"]] == row["features"]
    first = next(e for e in episode.steps[0].events if e.kind == "decision")
    assert first.data["reason"] == "continue" and set(first.data["scores"]) == {"t", "risk", "threshold"}
    # Without an intervention the overseen episode is worth what the continue branch at t = 0 is.
    at_start = rows[0]["branches"]["continue"]["utility"]
    assert online_utility(episode, CONFIG, "oversight-scalar") == pytest.approx(at_start)


def test_a_router_that_routes_every_prefix_to_expert_k_hands_over_for_k_steps_then_decides_again(
        corridor: CorridorBenchmark, training_rows: list[dict[str, Any]], tmp_path: Path) -> None:
    always = ScalarRouter(RiskScore("logistic").fit(*failure_data(training_rows)), threshold=-np.inf,
                          intervention="expert_k")
    episode = overseen(corridor, ScalarRoutingController(save_router(always, tmp_path), name="scalar"), 3, tmp_path)
    choices = overseer_choices(episode, "scalar")
    assert choices == [(t, "expert_k") for t in range(0, len(episode.steps), CONFIG.k)]
    assert all(step.action == 1 for step in episode.steps)  # the corridor's expert always moves right
    assert episode.outcome is not None and episode.outcome.success
    expected = CONFIG.w - CONFIG.c_intervene * len(choices) - CONFIG.s * len(episode.steps)
    assert online_utility(episode, CONFIG, "scalar") == pytest.approx(expected)


def test_a_router_that_quits_everywhere_halts_before_the_first_step(
        corridor: CorridorBenchmark, training_rows: list[dict[str, Any]], tmp_path: Path) -> None:
    quitter = TwoThresholdRouter(RiskScore("logistic").fit(*failure_data(training_rows)), low=-np.inf, high=-np.inf)
    episode = overseen(corridor, ScalarRoutingController(save_router(quitter, tmp_path)), 0, tmp_path)
    assert episode.steps == [] and episode.outcome is not None and episode.outcome.metrics["truncated"]
    assert overseer_choices(episode, "oversight-scalar") == [(0, "quit")]
    assert online_utility(episode, CONFIG, "oversight-scalar") == CONFIG.u_quit


def test_each_controller_refuses_the_other_kind_of_model_and_offline_only_interventions(
        training_rows: list[dict[str, Any]], model_path: Path, tmp_path: Path) -> None:
    risk = RiskScore("logistic").fit(*failure_data(training_rows))
    with pytest.raises(ValueError, match="not an ActionConditioned"):
        OversightController(save_router(ScalarRouter(risk, threshold=0.5), tmp_path))
    with pytest.raises(ValueError, match="not a scalar router"):
        ScalarRoutingController(model_path)
    rollback = ScalarRouter(risk, threshold=0.5, intervention="rollback")
    with pytest.raises(ValueError, match="cannot carry out online"):
        ScalarRoutingController(save_router(rollback, tmp_path))
    with pytest.raises(FileNotFoundError):
        OversightController(tmp_path / "missing.joblib")


def test_a_router_that_hands_over_to_the_stronger_agent_does_so_for_good_and_needs_the_episodes_agent(
        corridor: CorridorBenchmark, training_rows: list[dict[str, Any]], tmp_path: Path) -> None:
    from gauntlet.errors import UserError

    always = ScalarRouter(RiskScore("logistic").fit(*failure_data(training_rows)), threshold=-np.inf,
                          intervention="stronger")
    path = save_router(always, tmp_path)
    strong, base = [], []
    for index in HELD_OUT:
        episode = overseen(corridor, ScalarRoutingController(path, name="scalar"), index, tmp_path)
        assert overseer_choices(episode, "scalar") == [(0, "stronger")]  # one choice: it lasts to the end
        reasons = [e.data["reason"] for step in episode.steps[1:] for e in step.events if e.kind == "decision"]
        assert reasons == ["handover (stronger)"] * (len(episode.steps) - 1)
        assert episode.outcome is not None
        expected = CONFIG.w * episode.outcome.success - CONFIG.c_intervene - CONFIG.s * len(episode.steps)
        assert online_utility(episode, CONFIG, "scalar") == pytest.approx(expected)
        strong.append(episode.outcome.success)
        alone = rollout(corridor.make_env(index), corridor.make_agent(index), seed=corridor.episode_seed(index))
        base.append(alone.outcome.success)
    # The stronger agent lapses at a quarter of the base agent's rate, so it reaches the end more often.
    assert np.mean(strong) > np.mean(base)
    # Without the episode's stronger agent (handed over by for_episode) the router cannot act: refused at once.
    with pytest.raises(UserError, match="'stronger', which this episode cannot carry out"):
        rollout(corridor.make_env(0), corridor.make_agent(0), seed=corridor.episode_seed(0),
                hooks=[ScalarRoutingController(path)])
