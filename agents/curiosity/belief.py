"""A curious policy trained by policy gradient on the per-step ``icl_lp`` reward of LocationFinding-v0.

The DAD-style network (``dad.py``) maps the raw history to a design and is trained by pathwise
gradients of the summed icl_lp; it learned little beyond a good fixed schedule. This policy reads the
history through its own in-context learner instead, and is trained by REINFORCE on the reward itself:

* **Belief map.** The agent's learner is the env's learner family (self-normalised importance
  sampling over ``n_belief_particles`` prior particles, ``ParticleLearner``). For every candidate
  design g of the planning policies' grid (``policies.candidates``: 11 × 11 points on [−4, 4]²) it
  reads the learner's posterior predictive at g after the history so far:

      m_t(g) = Σ_p w_p μ(g, θ_p),   v_t(g) = Σ_p w_p μ(g, θ_p)² − m_t(g)²,   w_p ∝ Π_{i<=t} N(y_i; μ(ξ_i, θ_p), σ²)

* **Policy.** One small MLP scores each cell from (m_t(g), log v_t(g), t / T, ‖g‖²) — the same weights
  for every cell — and the policy is the softmax over cells:

      π(g | h_t) = softmax_g f_ψ(m_t(g), log v_t(g), t/T, ‖g‖²)                       (policy)

  The last layer starts at zero: the untrained policy picks cells uniformly at random. At execution
  the agent takes the most probable cell (deterministic).

* **Reward.** The env's ``icl_lp`` of step t (``lp.py``), probes x̃ ~ N(0, I) with outcomes drawn from
  the episode's θ, computed with the contrastive particle learner of ``dad.py`` (the history's own θ
  held as one particle beside ``n_reward_particles`` prior draws: a learner whose posterior does not
  collapse onto the nearest prior particle, see docs/curiosity.md):

      r_t = (1/M) Σ_j [ ℓ(ỹ_j | x̃_j, C_{t−1}) − ℓ(ỹ_j | x̃_j, C_t) ],   ℓ = −log p            (icl_lp)

  ``icl_lp_rewards`` computes them; a test checks them against the env's rewards with the same
  learner and probes. The policy never sees θ or the probes.

* **Training.** REINFORCE with reward-to-go and the batch mean of the reward-to-go at each step as
  baseline (Williams 1992):

      ∇J ≈ (1/B) Σ_b Σ_t ∇ log π(g_t^b | h_t^b) (G_t^b − mean_b' G_t^b),   G_t = Σ_{s>=t} r_s   (REINFORCE)

  with fresh θ, outcome noise, probes and particle sets every batch. Deterministic given the config
  (seeded, one torch thread); ``build`` writes the weights into the data cache
  (``gauntlet data build curiosity-belief-policy``, about 8 minutes on one core).

The weights of config "default" also ship with the package (``belief_default.json``, 1.2k numbers,
written by ``python -m gauntlet.agents.curiosity.belief`` from the cached build), so the agent and the
demo start without training; ``load_policy(config, source="cache")`` trains or reads the cache instead.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from gauntlet.agent import Agent
from gauntlet.agents.curiosity.dad import train_and_save, training_history
from gauntlet.agents.curiosity.data_versions import BELIEF_POLICY as DATA_NAME
from gauntlet.agents.curiosity.data_versions import BELIEF_POLICY_VERSION as DATA_VERSION
from gauntlet.datacache import ensure_built
from gauntlet.envs.curiosity.location_finding_model import DESIGN_BOUND, LocationFindingModel, observed_history
from gauntlet.envs.curiosity.location_finding_model import intensity_torch as intensity  # μ(ξ, θ), every ξ and θ
from gauntlet.envs.curiosity.location_finding_model import paired_intensity_torch as own_intensity  # μ(ξ_b, θ_b)
from gauntlet.fileio import write_atomically

SHIPPED = Path(__file__).with_name("belief_default.json")


@dataclass(frozen=True)
class BeliefConfig(LocationFindingModel):
    """The env's model (``LocationFindingModel``'s fields, LocationFinding-v0 defaults), the two learners,
    the network and the training budget."""

    grid: int = 11  # cells per axis on [−4, 4]²: the planning policies' candidate set
    n_belief_particles: int = 2048  # the agent's own learner (features)
    n_reward_particles: int = 2048  # the contrastive learner of the reward (plus the history's own θ)
    n_probes: int = 32
    batch_size: int = 64
    steps: int = 200
    learning_rate: float = 3e-3
    hidden: int = 32
    seed: int = 0


CONFIGS = {"default": BeliefConfig(),
           "smoke": BeliefConfig(horizon=6, grid=5, n_belief_particles=64, n_reward_particles=64, n_probes=8,
                                 batch_size=8, steps=3, hidden=8)}


def design_grid(config: BeliefConfig) -> torch.Tensor:
    """The candidate designs ``(G, 2)`` in env units, row-major like ``policies.candidates``."""
    axis = torch.linspace(-1.0, 1.0, config.grid, dtype=torch.float64)
    return DESIGN_BOUND * torch.stack(torch.meshgrid(axis, axis, indexing="ij"), dim=-1).reshape(-1, 2)


class CellScorer(nn.Module):
    """f_ψ of equation (policy): a per-cell MLP over the belief map; logits ``(B, G)``."""

    def __init__(self, config: BeliefConfig):
        super().__init__()
        self.horizon = config.horizon
        self.score = nn.Sequential(nn.Linear(4, config.hidden), nn.Tanh(), nn.Linear(config.hidden, config.hidden),
                                   nn.Tanh(), nn.Linear(config.hidden, 1))
        last = cast(nn.Linear, self.score[-1])
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)
        self.radius: torch.Tensor
        self.register_buffer("radius", (design_grid(config) ** 2).sum(-1).float() / 10.0)

    def forward(self, mean: torch.Tensor, variance: torch.Tensor, step: int) -> torch.Tensor:
        features = torch.stack([mean / 3.0, torch.log(variance.clamp(min=0.0) + 1e-4) / 3.0,
                                torch.full_like(mean, step / self.horizon), self.radius.expand_as(mean)], dim=-1)
        return self.score(features.float())[..., 0]


def belief_map(log_w: torch.Tensor, grid_means: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """m_t(g), v_t(g) from unnormalised log weights ``(B, P)`` and μ(g, θ_p) ``(P, G)``; each ``(B, G)``."""
    weights = torch.softmax(log_w, dim=-1)
    mean = weights @ grid_means
    return mean, weights @ grid_means ** 2 - mean ** 2


def icl_lp_rewards(prior: torch.Tensor, designs: torch.Tensor, outcomes: torch.Tensor, probe_x: torch.Tensor,
                   probe_y: torch.Tensor, true_thetas: torch.Tensor, config: BeliefConfig) -> torch.Tensor:
    """Equation (icl_lp) for every step of histories ``designs (B, T, 2)``, ``outcomes (B, T)``: ``(B, T)``.

    The learner holds {θ_b} ∪ ``prior (P, K, 2)`` for history b; probes ``probe_x (B, M, 2)``, ``probe_y (B, M)``.
    """
    variance = config.noise_std ** 2
    probe_lik = torch.cat([(-0.5 * (probe_y - own_intensity(probe_x, true_thetas, config)) ** 2 / variance)[..., None],
                           -0.5 * (probe_y[..., None] - intensity(probe_x, prior, config)) ** 2 / variance], dim=-1)
    step_lik = torch.cat([(-0.5 * (outcomes - own_intensity(designs, true_thetas, config)) ** 2 / variance)[..., None],
                          -0.5 * (outcomes[..., None] - intensity(designs, prior, config)) ** 2 / variance], dim=-1)
    log_w = torch.cat([torch.zeros_like(step_lik[:, :1]), step_lik.cumsum(dim=1)], dim=1)  # (B, T+1, P+1)
    log_w = log_w - torch.logsumexp(log_w, dim=-1, keepdim=True)
    loss = -torch.logsumexp(probe_lik[:, None] + log_w[:, :, None, :], dim=-1).mean(-1)  # (B, T+1), constant dropped
    return loss[:, :-1] - loss[:, 1:]


def rollout(network: CellScorer, thetas: torch.Tensor, noise: torch.Tensor, belief_particles: torch.Tensor,
            config: BeliefConfig, generator: torch.Generator | None = None):
    """Run the policy (sampling, or argmax without ``generator``); designs ``(B, T, 2)``, outcomes, log π."""
    grid = design_grid(config).to(thetas.dtype)
    grid_means = intensity(grid, belief_particles, config).T  # (P, G)
    log_w = torch.zeros(len(thetas), len(belief_particles), dtype=thetas.dtype)
    designs, outcomes, log_probs = [], [], []
    for t in range(config.horizon):
        mean, variance = belief_map(log_w, grid_means)
        logits = network(mean, variance, t)
        if generator is None:
            cell = logits.argmax(-1)
        else:
            cell = torch.multinomial(torch.softmax(logits.detach(), -1), 1, generator=generator)[:, 0]
        log_probs.append(torch.log_softmax(logits, -1).gather(1, cell[:, None])[:, 0])
        design = grid[cell]
        outcome = own_intensity(design[:, None], thetas, config)[:, 0] + config.noise_std * noise[:, t]
        log_w = log_w - 0.5 * (outcome[:, None] - grid_means[:, cell].T) ** 2 / config.noise_std ** 2
        designs.append(design)
        outcomes.append(outcome)
    return torch.stack(designs, 1), torch.stack(outcomes, 1), torch.stack(log_probs, 1)


def reinforce_step(optimiser: torch.optim.Optimizer, log_probs: torch.Tensor, advantage: torch.Tensor) -> None:
    """One REINFORCE update: ascend sum_t log pi(d_t | h_t) (G_t - b), batch-averaged (equation REINFORCE with
    a baseline; ``advantage`` is G_t - b, computed without gradient)."""
    loss = -(log_probs * advantage.to(log_probs.dtype)).sum(1).mean()
    optimiser.zero_grad()
    loss.backward()
    optimiser.step()


def train(config: BeliefConfig, log_every: int = 10) -> tuple[CellScorer, dict[str, Any]]:
    """Equation (REINFORCE) on the icl_lp rewards; returns the network and the return curve."""
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    draw = lambda *shape: torch.randn(*shape, generator=generator)
    network = CellScorer(config)
    optimiser = torch.optim.Adam(network.parameters(), lr=config.learning_rate)
    returns, started = [], time.perf_counter()
    for _ in range(config.steps):
        thetas, noise = draw(config.batch_size, config.n_sources, 2), draw(config.batch_size, config.horizon)
        belief_particles = draw(config.n_belief_particles, config.n_sources, 2)
        reward_particles = draw(config.n_reward_particles, config.n_sources, 2)
        probe_x = draw(config.batch_size, config.n_probes, 2).clamp(-DESIGN_BOUND, DESIGN_BOUND)
        probe_y = own_intensity(probe_x, thetas, config) + config.noise_std * draw(config.batch_size, config.n_probes)
        designs, outcomes, log_probs = rollout(network, thetas, noise, belief_particles, config, generator)
        with torch.no_grad():
            rewards = icl_lp_rewards(reward_particles, designs, outcomes, probe_x, probe_y, thetas, config)
            to_go = rewards.flip(1).cumsum(1).flip(1)
            advantage = to_go - to_go.mean(0, keepdim=True)
        reinforce_step(optimiser, log_probs, advantage)
        returns.append(float(rewards.sum(1).mean()))
    return network, training_history(returns, log_every, started, last=20)


def build(folder: Path, config: str = "default") -> None:
    """Train the policy of ``CONFIGS[config]``; write ``weights.pt`` and ``training.json``."""
    if config not in CONFIGS:
        raise ValueError(f"config must be one of {sorted(CONFIGS)}; got {config!r}")
    train_and_save(folder, train, CONFIGS[config])


def load_policy(config: str = "default", source: str = "shipped") -> tuple[CellScorer, BeliefConfig]:
    """The trained scorer. ``source="shipped"`` reads the packaged weights of "default" (other configs,
    or a shipped file from another config or version, fall back to the cache); ``"cache"`` trains into
    the data cache on first use (minutes for "default")."""
    if config not in CONFIGS:
        raise ValueError(f"config must be one of {sorted(CONFIGS)}; got {config!r}")
    if source not in ("shipped", "cache"):
        raise ValueError(f"source must be 'shipped' or 'cache'; got {source!r}")
    network = CellScorer(CONFIGS[config])
    shipped = json.loads(SHIPPED.read_text()) if source == "shipped" and config == "default" and SHIPPED.exists() \
        else None
    if shipped is not None and shipped["config"] == asdict(CONFIGS[config]) and shipped["version"] == DATA_VERSION:
        state = {name: torch.tensor(value, dtype=torch.float32) for name, value in shipped["state"].items()}
    else:
        folder = ensure_built(DATA_NAME, DATA_VERSION, build, params={} if config == "default" else {"config": config})
        state = torch.load(folder / "weights.pt", weights_only=True)
    network.load_state_dict(state)
    network.eval()
    return network, CONFIGS[config]


def export_shipped(path: Path = SHIPPED) -> Path:
    """Write the cached "default" weights (built if needed) as the package's ``belief_default.json``."""
    folder = ensure_built(DATA_NAME, DATA_VERSION, build)
    training = json.loads((folder / "training.json").read_text())
    state = torch.load(folder / "weights.pt", weights_only=True)
    record = {"version": DATA_VERSION, "config": training["config"],
              "made_by": "python -m gauntlet.agents.curiosity.belief",
              "training": {key: training[key] for key in ("mean_return_per_block", "block_steps", "seconds")},
              "state": {name: value.tolist() for name, value in state.items()}}
    write_atomically(path, json.dumps(record) + "\n")
    return path


class CuriousBeliefAgent(Agent):
    """The trained policy acting in LocationFinding-v0: the most probable cell of equation (policy).

    Its learner holds ``n_belief_particles`` prior particles drawn from a fixed seed (independent of
    any episode). The action is the chosen grid design / 4, in [−1, 1]².
    """

    name = "curiosity-belief"

    def __init__(self, config: str = "default", particle_seed: int = 1, source: str = "shipped",
                 network: CellScorer | None = None):
        self.config_name = config
        if network is None:  # a freshly trained scorer (other training seeds) skips the loading
            self.network, self.settings = load_policy(config, source)
        elif config not in CONFIGS:
            raise ValueError(f"config must be one of {sorted(CONFIGS)}; got {config!r}")
        else:
            self.network, self.settings = network.eval(), CONFIGS[config]
        particles = torch.randn(self.settings.n_belief_particles, self.settings.n_sources, 2,
                                generator=torch.Generator().manual_seed(particle_seed), dtype=torch.float64)
        self.particles = particles
        self.grid = design_grid(self.settings)
        self.grid_means = intensity(self.grid, particles, self.settings).T  # (P, G)

    def config(self) -> dict[str, Any]:
        return {"config": self.config_name}

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> np.ndarray:
        designs, outcomes, steps = observed_history(observation, np.float64)
        history_x, history_y = torch.as_tensor(designs[:steps]), torch.as_tensor(outcomes[:steps])
        with torch.no_grad():
            log_lik = -0.5 * (history_y[:, None] - intensity(history_x, self.particles, self.settings)) ** 2
            log_w = (log_lik.sum(0) / self.settings.noise_std ** 2)[None]
            mean, variance = belief_map(log_w, self.grid_means)
            cell = int(self.network(mean, variance, min(steps, self.settings.horizon - 1)).argmax(-1)[0])
        return (self.grid[cell].numpy() / DESIGN_BOUND).astype(np.float32)



if __name__ == "__main__":
    print(f"wrote {export_shipped()}")
