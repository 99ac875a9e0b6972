"""Design policies for the curiosity envs.

Each policy keeps a *model* of the env (the same class built from the same arguments; it knows the
prior and the likelihood, never the episode's θ), loads the observed history into it and scores a
finite candidate set of designs:

* ``RandomDesignAgent``: a uniform candidate (for rules: an input not yet queried).
* ``UncertaintySamplingAgent``: the candidate with the largest predictive variance (real outcomes)
  or predictive entropy (categorical outcomes) under the exact Bayesian learner.
* ``GreedyLPAgent`` (the untrained curious policy): the candidate with the largest *expected* ICL
  learning progress, using nothing but the in-context learner's predictions and counterfactual
  contexts (see the class).
* ``GreedyEIGAgent``: the candidate with the largest expected information gain
  I(θ; y | x, C) = H[p(y | x, C)] − E_{θ ~ p(θ|C)} H[p(y | x, θ)] (exact for regression, rules and the
  gridworld; particle nested estimate for location finding, ``particle_information_gain``).

Ties are broken uniformly at random with the agent's RNG, seeded per episode.
Candidates: 101 points on [−1, 1] (regression), an 11 × 11 grid over the design square (location
finding), every input (rules), every action (gridworld).
"""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import numpy as np

from gauntlet.agent import Agent
from gauntlet.envs.curiosity.active_regression import ActiveRegressionEnv
from gauntlet.envs.curiosity.base import CuriosityEnv
from gauntlet.envs.curiosity.learners import InContextLearner
from gauntlet.envs.curiosity.location_finding import LocationFindingEnv, particle_information_gain
from gauntlet.envs.curiosity.location_finding_model import DESIGN_BOUND
from gauntlet.envs.curiosity.lp import icl_learning_progress
from gauntlet.envs.curiosity.predictive import CategoricalPredictive, GaussianMixturePredictive
from gauntlet.envs.curiosity.rule_discovery import RuleDiscoveryEnv

LOCATION_GRID = 11
# The runner seeds the env and the agent with the same episode seed. ``default_rng(seed)`` would then
# replay the env's own stream, the one that drew θ (a prior-random design would land on a source),
# so agents draw from a stream of their own.
AGENT_STREAM = 0xA6E7


def agent_rng(seed: int | None) -> np.random.Generator:
    """The agent's generator for an episode seed: independent of the env's ``np_random`` with that seed."""
    return np.random.default_rng(None if seed is None else [int(seed), AGENT_STREAM])


def candidates(model: CuriosityEnv) -> tuple[list[Any], np.ndarray]:
    """The candidate actions of ``model`` in its current state and their designs ``(M, D)``."""
    if isinstance(model, ActiveRegressionEnv):
        points = np.linspace(-1.0, 1.0, 101)
        return [np.array([x], dtype=np.float32) for x in points], points[:, None]
    if isinstance(model, LocationFindingEnv):
        axis = np.linspace(-1.0, 1.0, LOCATION_GRID)
        grid = np.array([(a, b) for a in axis for b in axis])
        return [row.astype(np.float32) for row in grid], DESIGN_BOUND * grid
    actions = list(range(int(cast(gym.spaces.Discrete, model.action_space).n)))  # the other envs are discrete
    return actions, np.array([model.design_of(action) for action in actions])


class CuriosityPolicy(Agent):
    """A policy that scores candidate designs with a model of the env; subclasses define ``scores``."""

    def __init__(self, env_id: str, **env_kwargs: Any):
        self.env_id = env_id
        self.env_kwargs = env_kwargs
        full_id = f"gauntlet/{env_id}" if f"gauntlet/{env_id}" in gym.registry else env_id
        model = gym.make(full_id, **env_kwargs).unwrapped
        if not isinstance(model, CuriosityEnv):
            raise ValueError(f"{env_id!r} is not a curiosity env (expected one of gauntlet/ActiveRegression-v0, "
                             "LocationFinding-v0, RuleDiscovery-v0, CuriousGridworld-v0)")
        self.model = model
        self.rng = np.random.default_rng()

    def config(self) -> dict[str, Any]:
        return {"env_id": self.env_id, **self.env_kwargs}

    def reset(self, *, seed, observation_space, action_space) -> None:
        self.rng = agent_rng(seed)

    def scores(self, designs: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> Any:
        self.model.load_history(observation)
        actions, designs = candidates(self.model)
        scores = self.scores(designs)
        best = np.flatnonzero(scores >= scores.max() - 1e-12)
        return actions[int(self.rng.choice(best))]


class RandomDesignAgent(CuriosityPolicy):
    """Uniform over the candidate designs; for rules, over the inputs not yet queried (pool-based)."""

    name = "curiosity-random"

    def scores(self, designs: np.ndarray) -> np.ndarray:
        if isinstance(self.model, RuleDiscoveryEnv):
            queried = self.model.context[0]
            return -np.array([np.any(np.all(queried == design, axis=1)) for design in designs], dtype=float)
        return np.zeros(len(designs))


class UncertaintySamplingAgent(CuriosityPolicy):
    """The candidate whose outcome the exact learner is least sure of (variance or entropy)."""

    name = "curiosity-uncertainty"

    def scores(self, designs: np.ndarray) -> np.ndarray:
        context_x, context_y = self.model.context
        predictive = self.model.exact_learner.predict(context_x[None], context_y[None], designs[None])
        if isinstance(predictive, CategoricalPredictive):
            return predictive.entropy()[0]
        if isinstance(predictive, GaussianMixturePredictive):
            return predictive.total_variance[0]
        return predictive.variance[0]


class GreedyEIGAgent(CuriosityPolicy):
    """The candidate with the largest expected information gain about θ (one step ahead)."""

    name = "curiosity-greedy-eig"

    def __init__(self, env_id: str, n_outer: int = 128, **env_kwargs: Any):
        super().__init__(env_id, **env_kwargs)
        self.n_outer = n_outer

    def config(self) -> dict[str, Any]:
        return {**super().config(), "n_outer": self.n_outer}

    def scores(self, designs: np.ndarray) -> np.ndarray:
        if isinstance(self.model, LocationFindingEnv):
            context_x, context_y = self.model.context
            return particle_information_gain(self.model.exact_learner, context_x, context_y, designs,
                                             n_outer=self.n_outer, rng=self.rng)
        return np.array([self.model.information_gain(design) for design in designs])


class GreedyLPAgent(CuriosityPolicy):
    """The candidate that maximises the expected ICL learning progress, one step ahead.

    The agent cannot see θ, so it imagines outcomes with the learner itself: for candidate x,
        score(x) = (1/S) Σ_s icl_lp(x, y_s),   y_s ~ p(y | x, C),
    with probe designs x̃_j from the env's probe distribution and probe outcomes drawn *jointly* with
    the imagined outcome, ỹ_j ~ p(ỹ | x̃_j, C ∪ {(x, y_s)}) (sequential sampling from the learner is
    sampling its joint predictive; independent probe outcomes would make every imagined observation
    look harmful). For the exact learner the score is the expected reduction of the predictive loss
    on the probes (expected predictive information gain, >= 0); any ``InContextLearner`` can be
    plugged in (``learner=``). Every candidate and imagined outcome is one context of a batched call.
    """

    name = "curiosity-greedy-lp"

    def __init__(self, env_id: str, n_outcomes: int = 4, learner: InContextLearner | None = None,
                 **env_kwargs: Any):
        super().__init__(env_id, **env_kwargs)
        self.n_outcomes = n_outcomes
        self.learner = learner if learner is not None else self.model.exact_learner

    def config(self) -> dict[str, Any]:
        return {**super().config(), "n_outcomes": self.n_outcomes}

    def scores(self, designs: np.ndarray) -> np.ndarray:
        context_x, context_y = self.model.context
        n_candidates, samples = len(designs), self.n_outcomes
        probe_x = self.model.draw_probe_designs(self.rng)
        imagined = self.learner.predict(context_x[None], context_y[None], designs[None])
        outcomes = np.concatenate([imagined.sample(self.rng) for _ in range(samples)]).reshape(-1)  # (S·M,)
        batch = n_candidates * samples
        new_x = np.tile(designs, (samples, 1))
        augmented_x = np.concatenate([np.broadcast_to(context_x, (batch, *context_x.shape)), new_x[:, None]], axis=1)
        augmented_y = np.concatenate([np.broadcast_to(context_y, (batch, *context_y.shape)), outcomes[:, None]],
                                     axis=1)
        probes = np.broadcast_to(probe_x, (batch, *probe_x.shape))
        probe_y = self.learner.predict(augmented_x, augmented_y, probes).sample(self.rng)  # joint with y_s
        lp = icl_learning_progress(self.learner, augmented_x[:, :-1], augmented_y[:, :-1], None, new_x, outcomes,
                                   probes, probe_y)
        return lp.reshape(samples, n_candidates).mean(axis=0)


class PriorRandomDesignAgent(Agent):
    """DAD's random baseline for location finding: ξ ~ N(0, I₂), the sources' prior (clipped to the square).

    ``curiosity-random`` draws uniformly on the whole design square [−4, 4]²; most of those points lie
    where no source is likely, so this baseline is the fairer one to compare trained policies with.
    """

    name = "curiosity-random-prior"

    def __init__(self, env_id: str = "LocationFinding-v0", **env_kwargs: Any):
        if env_id.removeprefix("gauntlet/") != "LocationFinding-v0":
            raise ValueError(f"curiosity-random-prior designs for gauntlet/LocationFinding-v0 only; got {env_id!r}")
        self.env_id = env_id
        self.rng = np.random.default_rng()

    def config(self) -> dict[str, Any]:
        return {"env_id": self.env_id}

    def reset(self, *, seed, observation_space, action_space) -> None:
        self.rng = agent_rng(seed)

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> np.ndarray:
        design = np.clip(self.rng.standard_normal(2), -DESIGN_BOUND, DESIGN_BOUND)
        return (design / DESIGN_BOUND).astype(np.float32)
