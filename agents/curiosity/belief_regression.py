"""A curious policy trained by policy gradient on ActiveRegression-v0's own ``icl_lp`` reward (the belief-map
idea of ``belief.py``, ported from location finding).

The PPO policy (``ppo.py``) reads the raw, zero-padded history and did not beat random designs. This
policy reads the history through its in-context learner instead:

* **Belief map.** The agent's learner is the env's learner (the exact Bayesian linear-basis posterior,
  ``BayesianLinearLearner``). For each candidate x of the planning policies' set (``policies.candidates``:
  101 points on [−1, 1]) it reads the posterior mean and the epistemic variance of f(x) after the history:

      S_t⁻¹ = I / s_w² + Σ_{i<=t} φ(x_i)φ(x_i)ᵀ / σ²,   m_t(x) = φ(x)ᵀ S_t Σ_i φ(x_i) y_i / σ²,
      v_t(x) = φ(x)ᵀ S_t φ(x)

* **Policy.** One small MLP scores each cell from (m_t(x), log v_t(x), t / T, x) — the same weights for
  every cell — and the policy is the softmax over cells:

      π(x | h_t) = softmax_x f_ψ(m_t(x), log v_t(x), t/T, x)                                   (policy)

  The last layer starts at zero (the untrained policy is uniform over the cells); at execution the agent
  takes the most probable cell.

* **Reward.** The env's default ``icl_lp`` (``lp.py``) with the env's default learner and probe
  distribution: M probes x̃ ~ U(−1, 1) with outcomes drawn from the episode's w,

      r_t = (1/M) Σ_j [ ℓ(ỹ_j | x̃_j, C_{t−1}) − ℓ(ỹ_j | x̃_j, C_t) ],   ℓ = −log p               (icl_lp)

  ``icl_lp_rewards`` computes them for whole batches; a test checks them against the env's rewards. The
  policy never sees w, the probes, true LP or the information gain.

* **Training.** REINFORCE with reward-to-go (as ``belief.py``), but with a per-task baseline: each update draws
  batch_size / group_size tasks (w, outcome noise, probes) and rolls the policy out ``group_size`` times on
  each; the baseline of a rollout is the mean reward-to-go of its group at that step,

      ∇J ≈ (1/B) Σ_b Σ_t ∇ log π(x_t^b | h_t^b) (G_t^b − mean_{b' in group(b)} G_t^{b'}),   G_t = Σ_{s>=t} r_s

  The summed icl_lp of an episode varies across w far more than across design rules on the same w (a
  test measures it), so the batch-mean baseline of ``belief.py`` leaves the gradient mostly noise here.
  Deterministic given the config (seeded, one torch thread).
  ``build`` writes the weights into the data cache (``gauntlet data build curiosity-belief-regression-policy``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from gauntlet.agent import Agent
from gauntlet.agents.curiosity.belief import reinforce_step
from gauntlet.agents.curiosity.dad import train_and_save, training_history
from gauntlet.agents.curiosity.data_versions import REGRESSION_BELIEF_POLICY as DATA_NAME
from gauntlet.agents.curiosity.data_versions import REGRESSION_BELIEF_POLICY_VERSION as DATA_VERSION
from gauntlet.datacache import ensure_built


@dataclass(frozen=True)
class RegressionBeliefConfig:
    """The env's model (ActiveRegression-v0 defaults), the candidate grid, the network and the budget."""

    horizon: int = 20
    n_features: int = 8
    length_scale: float = 0.3
    weight_std: float = 1.0
    noise_std: float = 0.2
    grid: int = 101  # candidates on [−1, 1]: the planning policies' set
    n_probes: int = 64  # the env's default
    batch_size: int = 64  # histories per update: batch_size / group_size tasks, group_size rollouts each
    group_size: int = 4  # rollouts sharing one task's w, outcome noise and probes (their mean is the baseline)
    steps: int = 200
    learning_rate: float = 3e-3
    hidden: int = 32
    seed: int = 0


CONFIGS = {"default": RegressionBeliefConfig(),
           "smoke": RegressionBeliefConfig(horizon=5, grid=11, n_probes=8, batch_size=8, group_size=2, steps=3,
                                           hidden=8)}


def design_grid(config: RegressionBeliefConfig) -> torch.Tensor:
    """The candidate designs ``(G,)``, as ``policies.candidates`` for 101 cells."""
    return torch.as_tensor(np.linspace(-1.0, 1.0, config.grid))


def features(x: torch.Tensor, config: RegressionBeliefConfig) -> torch.Tensor:
    """φ(x) ``(..., F)``: the env's RBF features (``RBFFeatures``) in torch."""
    centres = torch.as_tensor(np.linspace(-1.0, 1.0, config.n_features), dtype=x.dtype)
    return torch.exp(-0.5 * ((x[..., None] - centres) / config.length_scale) ** 2)


class CellScorer(nn.Module):
    """f_ψ of equation (policy): a per-cell MLP over the belief map; logits ``(B, G)``."""

    def __init__(self, config: RegressionBeliefConfig):
        super().__init__()
        self.horizon = config.horizon
        self.score = nn.Sequential(nn.Linear(4, config.hidden), nn.Tanh(), nn.Linear(config.hidden, config.hidden),
                                   nn.Tanh(), nn.Linear(config.hidden, 1))
        last = cast(nn.Linear, self.score[-1])
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)
        self.where: torch.Tensor
        self.register_buffer("where", design_grid(config).float())

    def forward(self, mean: torch.Tensor, variance: torch.Tensor, step: int) -> torch.Tensor:
        features = torch.stack([mean / 2.0, torch.log(variance.clamp(min=0.0) + 1e-4) / 3.0,
                                torch.full_like(mean, step / self.horizon), self.where.expand_as(mean)], dim=-1)
        return self.score(features.float())[..., 0]


def posterior(designs: torch.Tensor, outcomes: torch.Tensor, mask: torch.Tensor,
              config: RegressionBeliefConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Posterior mean ``(..., F)`` and covariance ``(..., F, F)`` of w from ``designs (..., N)``, ``outcomes``, ``mask``
    (PRML eq. 3.50–3.51, as ``BayesianLinearLearner``)."""
    phi = features(designs, config) * mask[..., None]
    precision = (torch.eye(config.n_features, dtype=phi.dtype) / config.weight_std ** 2
                 + phi.transpose(-1, -2) @ phi / config.noise_std ** 2)
    covariance = torch.linalg.inv(precision)
    mean = (covariance @ (phi.transpose(-1, -2) @ (outcomes * mask)[..., None]))[..., 0] / config.noise_std ** 2
    return mean, covariance


def belief_map(mean_w: torch.Tensor, cov_w: torch.Tensor, grid_phi: torch.Tensor):
    """m_t(x), v_t(x) ``(B, G)`` from the posterior ``(B, F)``, ``(B, F, F)`` and φ of the grid ``(G, F)``."""
    return mean_w @ grid_phi.T, torch.einsum("gf,bfh,gh->bg", grid_phi, cov_w, grid_phi)


def icl_lp_rewards(designs: torch.Tensor, outcomes: torch.Tensor, probe_x: torch.Tensor, probe_y: torch.Tensor,
                   config: RegressionBeliefConfig) -> torch.Tensor:
    """Equation (icl_lp) with the exact learner for every step of ``designs (B, T)``, ``outcomes (B, T)``: ``(B, T)``.

    Probes ``probe_x (B, M)``, ``probe_y (B, M)``, uniform weights (the env's ``icl_lp``). Computed in float64."""
    designs, outcomes, probe_x, probe_y = (a.double() for a in (designs, outcomes, probe_x, probe_y))
    batch, horizon = designs.shape
    known = torch.arange(horizon)[None, :] < torch.arange(horizon + 1)[:, None]  # (T+1, T): C_0 .. C_T
    expand = lambda a: a[:, None].expand(batch, horizon + 1, horizon)
    mean_w, cov_w = posterior(expand(designs), expand(outcomes), known[None].expand(batch, -1, -1).to(designs.dtype),
                              config)
    phi = features(probe_x, config)  # (B, M, F)
    mean = torch.einsum("bmf,btf->btm", phi, mean_w)
    variance = torch.einsum("bmf,btfg,bmg->btm", phi, cov_w, phi) + config.noise_std ** 2
    loss = 0.5 * (torch.log(2 * torch.pi * variance) + (probe_y[:, None] - mean) ** 2 / variance)  # (B, T+1, M)
    loss = loss.mean(-1)
    return loss[:, :-1] - loss[:, 1:]


def rollout(network: CellScorer, weights: torch.Tensor, noise: torch.Tensor, config: RegressionBeliefConfig,
            generator: torch.Generator | None = None):
    """Run the policy (sampling, or argmax without ``generator``) on w ``(B, F)``; designs, outcomes and log π,
    each ``(B, T)``."""
    grid = design_grid(config)
    grid_phi = features(grid, config)
    batch = len(weights)
    designs = torch.zeros(batch, config.horizon, dtype=torch.float64)
    outcomes = torch.zeros_like(designs)
    log_probs = []
    for t in range(config.horizon):
        mask = (torch.arange(config.horizon) < t).to(torch.float64).expand(batch, -1)
        mean, variance = belief_map(*posterior(designs, outcomes, mask, config), grid_phi)
        logits = network(mean, variance, t)
        if generator is None:
            cell = logits.argmax(-1)
        else:
            cell = torch.multinomial(torch.softmax(logits.detach(), -1), 1, generator=generator)[:, 0]
        log_probs.append(torch.log_softmax(logits, -1).gather(1, cell[:, None])[:, 0])
        designs = designs.clone()
        outcomes = outcomes.clone()
        designs[:, t] = grid[cell]
        outcomes[:, t] = (grid_phi[cell] * weights).sum(-1) + config.noise_std * noise[:, t]
    return designs, outcomes, torch.stack(log_probs, 1)


def train(config: RegressionBeliefConfig, log_every: int = 10) -> tuple[CellScorer, dict[str, Any]]:
    """Equation (REINFORCE of ``belief.py``) on the icl_lp rewards; returns the network and the return curve."""
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    draw = lambda *shape: torch.randn(*shape, generator=generator, dtype=torch.float64)
    network = CellScorer(config)
    optimiser = torch.optim.Adam(network.parameters(), lr=config.learning_rate)
    returns, started = [], time.perf_counter()
    if config.group_size < 2 or config.batch_size % config.group_size:
        raise ValueError(f"group_size must be >= 2 and divide batch_size; got {config.group_size} and "
                         f"{config.batch_size}")
    tasks, group = config.batch_size // config.group_size, config.group_size
    repeat = lambda a: a.repeat_interleave(group, dim=0)  # rows b * group .. b * group + group - 1 share task b
    for _ in range(config.steps):
        weights = config.weight_std * draw(tasks, config.n_features)
        noise = draw(tasks, config.horizon)
        probe_x = 2 * torch.rand(tasks, config.n_probes, generator=generator, dtype=torch.float64) - 1
        probe_y = (features(probe_x, config) @ weights[..., None])[..., 0] + config.noise_std * draw(tasks,
                                                                                                   config.n_probes)
        designs, outcomes, log_probs = rollout(network, repeat(weights), repeat(noise), config, generator)
        with torch.no_grad():
            rewards = icl_lp_rewards(designs, outcomes, repeat(probe_x), repeat(probe_y), config)
            to_go = rewards.flip(1).cumsum(1).flip(1)
            advantage = to_go - repeat(to_go.reshape(tasks, group, -1).mean(1))
        reinforce_step(optimiser, log_probs, advantage)
        returns.append(float(rewards.sum(1).mean()))
    return network, training_history(returns, log_every, started, last=20)


def build(folder: Path, config: str = "default") -> None:
    """Train the policy of ``CONFIGS[config]``; write ``weights.pt`` and ``training.json``."""
    if config not in CONFIGS:
        raise ValueError(f"config must be one of {sorted(CONFIGS)}; got {config!r}")
    train_and_save(folder, train, CONFIGS[config])


def load_policy(config: str = "default") -> tuple[CellScorer, RegressionBeliefConfig]:
    """The trained scorer of ``CONFIGS[config]``, trained into the data cache on first use."""
    if config not in CONFIGS:
        raise ValueError(f"config must be one of {sorted(CONFIGS)}; got {config!r}")
    folder = ensure_built(DATA_NAME, DATA_VERSION, build, params={} if config == "default" else {"config": config})
    network = CellScorer(CONFIGS[config])
    network.load_state_dict(torch.load(folder / "weights.pt", weights_only=True))
    return network.eval(), CONFIGS[config]


class CuriousRegressionBeliefAgent(Agent):
    """The trained policy acting in ActiveRegression-v0: the most probable cell of equation (policy)."""

    name = "curiosity-belief-regression"

    def __init__(self, config: str = "default", network: CellScorer | None = None):
        if config not in CONFIGS:
            raise ValueError(f"config must be one of {sorted(CONFIGS)}; got {config!r}")
        self.config_name = config
        if network is None:
            self.network, self.settings = load_policy(config)
        else:  # a freshly trained scorer (other training seeds) skips the loading
            self.network, self.settings = network.eval(), CONFIGS[config]
        self.grid = design_grid(self.settings)
        self.grid_phi = features(self.grid, self.settings)

    def config(self) -> dict[str, Any]:
        return {"config": self.config_name}

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> np.ndarray:
        designs = np.asarray(observation["designs"], dtype=np.float64)
        outcomes = np.asarray(observation["outcomes"], dtype=np.float64)
        if designs.ndim != 2 or designs.shape[1] != 1 or outcomes.shape != designs.shape[:1]:
            raise ValueError(f"the observation must hold designs (T, 1) and outcomes (T,) of ActiveRegression-v0; "
                             f"got {designs.shape} and {outcomes.shape}")
        steps = int(observation["steps"])
        mask = torch.as_tensor(np.arange(len(outcomes)) < steps, dtype=torch.float64)[None]
        with torch.no_grad():
            history = posterior(torch.as_tensor(designs[None, :, 0]), torch.as_tensor(outcomes[None]), mask,
                                self.settings)
            mean, variance = belief_map(*history, self.grid_phi)
            cell = int(self.network(mean, variance, min(steps, self.settings.horizon - 1)).argmax(-1)[0])
        return np.array([self.grid[cell]], dtype=np.float32)
