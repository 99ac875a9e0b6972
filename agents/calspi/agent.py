"""The Cal-SPI agent: fit the ensemble, calibrate it, and act by gated search with a baseline-relative switch.

    agent = gauntlet.make_agent("calspi", domain="Hopper", dataset_size=10_000)
    episode = gauntlet.rollout(gym.make("gauntlet/CalSPI-Hopper-v0"), agent, seed=0)

Offline pipeline (``fit_model``), on the task's dataset split at random into train / validation /
calibration (70 / 10 / 20 % by default):
1. ensemble dynamics trained on the training split, elites chosen on validation (``ensemble``);
2. nonconformity scores on the calibration split and the Wilks threshold for (p, gamma)
   (``calibration``); too few calibration transitions for (p, gamma) is a ``ValueError`` saying
   how many are needed;
2b. the baseline's value V^b fitted on the dataset's discounted returns, with its own Wilks error
   bound delta_V and Bellman-residual bound delta_TD on the calibration split (``value``): the
   search's leaf value and the root's baseline value (``switching="paired"`` uses delta_TD);
3. at each step, gated MCTS from the current state and the root switch (``planner``). Every
   decision is an Episode event (source ``calspi``, kind ``decision``) holding the certificate,
   the values compared and whether it switched.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from gymnasium import spaces

from gauntlet.agent import Agent, AgentOutput
from gauntlet.agents.calspi.calibration import Certificate, calibrate, min_calibration_size, nonconformity_scores
from gauntlet.agents.calspi.planner import GatedSearch, SearchConfig
from gauntlet.episode import Event

if TYPE_CHECKING:
    from gauntlet.envs.calspi.tasks import CalSPITaskEnv

VARIANTS = {
    # name: planner settings that define it (see the planner's docstring)
    "calspi": {"gate": True, "switching": "certified", "penalty": 0.0},
    "no-gate": {"gate": False, "switching": "greedy", "penalty": 0.0},
    "mopo": {"gate": False, "switching": "greedy", "penalty": 1.0},
}


@dataclass
class ModelConfig:
    members: int = 7
    elites: int = 5
    hidden: int = 200
    layers: int = 3
    epochs: int = 30
    train_fraction: float = 0.7
    validation_fraction: float = 0.1
    value_steps: int = 1500  # gradient steps per refit of V^b; 0: no value model (truncated rollouts only)
    discount: float = 0.99  # of V^b's returns; must match the search's discount
    # Tighter certificates (``certificates``; options, the defaults reproduce the default rule):
    value_members: int = 1  # >= 2: a bootstrap ensemble of V^b fits with a state-dependent delta_V(s)
    value_local: str = "ensemble"  # delta_V(s) of the ensemble: "ensemble" (q_V sigma_V) or "binned" (V_bar bins)
    value_aware: str = "off"  # "global" / "local": calibrate |V^b(s') - V^b(s_hat')| (needs a value model)
    local_bins: int = 10  # most bins of a local (Mondrian) calibration


@dataclass
class FittedModel:
    """An ensemble with its certificate and the dataset facts the planner needs."""

    model: Any  # EnsembleDynamics
    certificate: Certificate
    reward_floor: float
    reward_scale: float
    calibration_indices: np.ndarray
    history: dict[str, list[float]]
    value: Any = None  # BaselineValue or None
    reward_ceiling: float = float("inf")  # the dataset's largest reward (upper bounds of uncertified steps)
    value_aware: Any = None  # certificates.ValueAwareBound or None


def split_indices(n: int, config: ModelConfig, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = np.random.default_rng([seed, n]).permutation(n)
    n_train, n_validation = int(config.train_fraction * n), int(config.validation_fraction * n)
    return order[:n_train], order[n_train:n_train + n_validation], order[n_train + n_validation:]


def fit_model(task: Any, *, p: float, gamma: float, seed: int, config: ModelConfig | None = None) -> FittedModel:
    """Steps 1-2 of Cal-SPI on ``task.dataset``: ensemble with elites, then the Wilks certificate."""
    import torch

    from gauntlet.agents.calspi.ensemble import EnsembleDynamics

    config = config or ModelConfig()
    if config.value_aware not in ("off", "global", "local"):
        raise ValueError(f"value_aware must be 'off', 'global' or 'local', got {config.value_aware!r}")
    if config.value_aware != "off" and config.value_steps <= 0:
        raise ValueError("value_aware needs a value model: set value_steps > 0")
    dataset = task.dataset.validate(task.observation_space.shape[0], task.action_space.shape[0])
    train, validation, held_out = split_indices(len(dataset), config, seed)
    needed = min_calibration_size(p, gamma)  # also validates p and gamma
    if len(held_out) < needed:
        calibration_fraction = 1 - config.train_fraction - config.validation_fraction
        raise ValueError(f"too little calibration data: the dataset's {len(dataset)} transitions leave "
                         f"{len(held_out)} for calibration, but p={p}, gamma={gamma} needs at least {needed} "
                         f"(a dataset of at least {int(np.ceil(needed / calibration_fraction))} transitions)")
    torch.set_num_threads(1)
    tr, va, ca = dataset.subset(train), dataset.subset(validation), dataset.subset(held_out)
    model = EnsembleDynamics(dataset.observations.shape[1], dataset.actions.shape[1], members=config.members,
                             elites=config.elites, hidden=config.hidden, layers=config.layers, seed=seed)
    history = model.fit(tr.observations, tr.actions, tr.next_observations, tr.rewards,
                        validation=(va.observations, va.actions, va.next_observations, va.rewards),
                        epochs=config.epochs)
    prediction = model.predict(ca.observations, ca.actions)
    targets = model.normalised_targets(ca.observations, ca.next_observations, ca.rewards)
    # Nonconformity score on the held-out split, then the Wilks order statistic (calibration).
    scores = nonconformity_scores(targets, prediction.normalised_mean, prediction.disagreement)
    certificate = calibrate(scores, prediction.state_disagreement, p=p, gamma=gamma)
    value: Any = None
    value_aware: Any = None
    if config.value_steps > 0:
        from gauntlet.agents.calspi.certificates import ValueAwareBound, ValueEnsemble
        from gauntlet.agents.calspi.value import BaselineValue, ValueFitConfig

        # V^b on the training and validation splits (returns need whole episodes, so the targets are
        # computed on the full dataset in its order), delta_V calibrated on the held-out split.
        fit_config = ValueFitConfig(steps=config.value_steps)
        if config.value_members >= 2:  # (a) bootstrap ensemble of V^b fits
            value = ValueEnsemble(dataset.observations.shape[1], discount=config.discount, members=config.value_members,
                                  seed=seed, config=fit_config, local=config.value_local, bins=config.local_bins)
        else:
            value = BaselineValue(dataset.observations.shape[1], discount=config.discount, seed=seed, config=fit_config)
        value.fit(dataset, np.concatenate([train, validation]), held_out, p=p, gamma=gamma)
        if config.value_aware != "off":  # (b) value-aware score on the calibration split, (c) binned
            value_aware = ValueAwareBound(local=config.value_aware == "local", bins=config.local_bins).fit(
                model, value, ca.observations, ca.actions, ca.next_observations, p=p, gamma=gamma)
    return FittedModel(model=model, certificate=certificate, reward_floor=float(dataset.rewards.min()),
                       reward_scale=float(max(dataset.rewards.std(), 1e-3)), calibration_indices=held_out,
                       history=history, value=value, reward_ceiling=float(dataset.rewards.max()),
                       value_aware=value_aware)


class CalSPIAgent(Agent):
    """Cal-SPI (``variant="calspi"``) and its search ablations (``"no-gate"``, ``"mopo"``)."""

    name = "calspi"

    def __init__(self, domain: str, dataset_size: int = 10_000, *, dataset_seed: int = 0, p: float = 0.95,
                 gamma: float = 0.95, seed: int = 0, variant: str = "calspi", search: dict[str, Any] | None = None,
                 model: dict[str, Any] | None = None):
        import gymnasium as gym

        if variant not in VARIANTS:
            raise ValueError(f"unknown Cal-SPI variant {variant!r}; expected one of {sorted(VARIANTS)}")
        self.domain, self.dataset_size, self.dataset_seed = domain, int(dataset_size), int(dataset_seed)
        self.p, self.gamma, self.seed, self.variant = float(p), float(gamma), int(seed), variant
        self.search_overrides, self.model_overrides = dict(search or {}), dict(model or {})
        env = gym.make(f"gauntlet/CalSPI-{domain}-v0", dataset_size=dataset_size, dataset_seed=dataset_seed)
        self.task = cast("CalSPITaskEnv", env.unwrapped)
        self.fitted = fit_model(self.task, p=self.p, gamma=self.gamma, seed=self.seed,
                                config=ModelConfig(**self.model_overrides))
        search_config = SearchConfig(**{**VARIANTS[variant], **self.search_overrides})
        self.planner = GatedSearch(self.fitted.model, self.fitted.certificate, self.task.baseline,
                                   self.task.is_terminal, self.task.action_space.low, self.task.action_space.high,
                                   reward_floor=self.fitted.reward_floor, reward_scale=self.fitted.reward_scale,
                                   config=search_config, value=self.fitted.value,
                                   reward_ceiling=self.fitted.reward_ceiling, value_aware=self.fitted.value_aware)
        self.rng = np.random.default_rng(self.seed)
        self.name = "calspi" if variant == "calspi" else f"calspi-{variant}"

    def config(self) -> dict[str, Any]:
        return {"domain": self.domain, "dataset_size": self.dataset_size, "dataset_seed": self.dataset_seed,
                "p": self.p, "gamma": self.gamma, "seed": self.seed, "variant": self.variant,
                "search": self.search_overrides, "model": self.model_overrides}

    def reset(self, *, seed: int | None, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        if observation_space.shape != self.task.observation_space.shape:
            raise ValueError(f"Cal-SPI for {self.domain} expects observations in {self.task.observation_space}, "
                             f"got {observation_space}")
        self.rng = np.random.default_rng([self.seed, 0 if seed is None else seed])

    def act(self, observation: Any, info: dict[str, Any]) -> AgentOutput:
        started = time.perf_counter()
        decision = self.planner.search(np.asarray(observation, dtype=np.float64), self.rng)
        cost_ms = (time.perf_counter() - started) * 1e3
        action = decision.action.astype(self.task.action_space.dtype)
        event = Event(source=self.name, kind="decision", data=decision.as_event_data(self.fitted.certificate),
                      cost_ms=cost_ms)
        return AgentOutput(action=action, events=[event])

    def search_config(self) -> dict[str, Any]:
        return asdict(self.planner.config)


def with_variant(agent: CalSPIAgent, variant: str, search: dict[str, Any] | None = None) -> CalSPIAgent:
    """A copy of ``agent`` sharing its fitted ensemble and certificate, searching as ``variant``
    (how the experiments compare Cal-SPI with its ablations on the very same model)."""
    import copy

    if variant not in VARIANTS:
        raise ValueError(f"unknown Cal-SPI variant {variant!r}; expected one of {sorted(VARIANTS)}")
    twin = copy.copy(agent)
    twin.variant, twin.search_overrides = variant, dict(search or agent.search_overrides)
    twin.name = "calspi" if variant == "calspi" else f"calspi-{variant}"
    twin.planner = copy.copy(agent.planner)
    twin.planner.config = SearchConfig(**{**VARIANTS[variant], **twin.search_overrides})
    return twin


def with_certificates(agent: CalSPIAgent, *, search: dict[str, Any], value_members: int = 1,
                      value_aware: str = "local", value_local: str = "ensemble", local_bins: int = 10,
                      name: str = "calspi-tight") -> CalSPIAgent:
    """A copy of ``agent`` sharing its fitted ensemble and certificate, with the tighter certificates
    (``certificates``) fitted on the same train / held-out split and the search options ``search``
    (e.g. ``{"state_value_term": "value-aware", "value_bound": "local"}``): how the experiments
    compare a tighter rule with the default on the very same dynamics model."""
    import copy

    from gauntlet.agents.calspi.certificates import ValueAwareBound, ValueEnsemble
    from gauntlet.agents.calspi.value import ValueFitConfig

    if value_aware not in ("global", "local"):
        raise ValueError(f"value_aware must be 'global' or 'local', got {value_aware!r}")
    config = ModelConfig(**agent.model_overrides)
    dataset = agent.task.dataset
    train, validation, held_out = split_indices(len(dataset), config, agent.seed)
    value = agent.fitted.value
    if value is None:
        raise ValueError("tighter certificates need the baseline value model (value_steps > 0)")
    if value_members >= 2:
        value = ValueEnsemble(dataset.observations.shape[1], discount=config.discount, members=value_members,
                              seed=agent.seed, config=ValueFitConfig(steps=config.value_steps), local=value_local,
                              bins=local_bins).fit(dataset, np.concatenate([train, validation]), held_out,
                                                   p=agent.p, gamma=agent.gamma)
    calibration = dataset.subset(held_out)
    bound = ValueAwareBound(local=value_aware == "local", bins=local_bins).fit(
        agent.fitted.model, value, calibration.observations, calibration.actions, calibration.next_observations,
        p=agent.p, gamma=agent.gamma)
    twin = copy.copy(agent)
    twin.fitted = FittedModel(**{**agent.fitted.__dict__, "value": value, "value_aware": bound})
    twin.search_overrides = dict(search)
    twin.planner = GatedSearch(agent.fitted.model, agent.fitted.certificate, agent.task.baseline,
                               agent.task.is_terminal, agent.task.action_space.low, agent.task.action_space.high,
                               reward_floor=agent.fitted.reward_floor, reward_scale=agent.fitted.reward_scale,
                               config=SearchConfig(**{**VARIANTS["calspi"], **search}), value=value,
                               reward_ceiling=agent.fitted.reward_ceiling, value_aware=bound)
    twin.name = name
    return twin
