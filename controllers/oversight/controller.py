"""Oversight controllers for the runner: a trained overseer deployed online (``gauntlet.hooks.Controller``).

Before every step the runner asks ``decide(prefix, candidates)``. The controller builds the prefix as
the overseer sees it (``History.from_steps``: no privileged information), computes the same prefix
features the branched rows were trained on, and picks an overseer action:

``continue``  the agent's proposal goes ahead (``Decision.proceed``);
``quit``      the episode ends now (the runner's ``halt``);
``expert``    from now on the expert acts: every remaining step is a ``replace_action`` with the
              expert's action (the expert is the benchmark's ``make_expert``);
``expert_k``  the same for ``k`` steps (the utility configuration's ``k``); then the controller decides
              again at every step;
``stronger``  from now on the benchmark's stronger agent acts, as ``expert`` does. Where the benchmark's
              agents hold a conversation (``stronger_takes_over``, the LLM benchmarks) it takes over the
              running agent's state at the prefix (``restore`` of the agent's ``snapshot``), as the
              branching protocol's ``stronger`` does; elsewhere it acts from its state at the reset. It is
              the episode's own stronger agent (``make_agent(episode, strength="strong")``), so the caller
              that knows the episode hands it over (``for_episode``; ``compare_online`` does);
``hint``,     the running agent writes its reply again after the overseer's notice (the benchmark's
``confirm``   ``revised_output``: a hint shows the expert's next action, a confirmation request shows the
              proposal back) and that reply's action runs, as one ``replace_action`` whose output (messages,
              events) the runner records in place of the proposal; the agent then goes on by itself.

``rollback`` is not carried out online: rolling back would need the runner to rewind an episode it has
already recorded. The online controller chooses among the other actions the model knows and this episode
allows (``available``: ``stronger`` only with a stronger agent handed over, ``hint`` and ``confirm`` only
where the benchmark can revise a reply and the running agent has one to revise); the offline evaluation
(``metrics.evaluate``) scores all of them.

What is recorded. A decision at prefix ``t`` has ``reason`` equal to the overseer action chosen and
``scores`` with ``t`` and the model's view: for ``OversightController`` ``utility:<action>`` (the
predicted mean utility) and ``dispersion:<action>`` (the spread of the ensemble) of every action it
chooses among; for ``ScalarRoutingController`` ``risk`` and its threshold(s). A step inside a handover
is a ``replace_action`` whose reason starts with ``handover``. ``overseer_choices`` reads the choices
back from an episode and ``online_utility`` prices a whole episode as the rows price a branch.

Registered (``registration.py``) as the controllers ``oversight`` and ``oversight-scalar``:
``gauntlet run ... --controller oversight --controller-config '{"model": "FILE"}'``.

Where they can oversee. A handover acts the expert of the benchmark the model was trained on, so the
env must give that expert its input. The taxi expert reads the observation, so ``gauntlet run Taxi-v4``
works; the expert of corridor, chem and disaster (``PrivilegedExpert``) acts
``info["privileged"]["expert_action"]``, which only the benchmark's own env names (``Benchmark.make_env``:
for the tool suites, ``GoldContinuation`` over the suite's env). ``compose`` refuses, before any episode,
``gauntlet eval`` (a task suite's env names no expert action) and a ``gauntlet run`` whose env's reset
info lacks what the expert reads, pointing to ``gauntlet oversight deploy``, which runs the benchmark's
env; ``decide`` makes the same check at ``t = 0`` of every episode (a rollout outside the CLI).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gauntlet.agent import AgentOutput
from gauntlet.controllers.oversight.benchmarks import Benchmark, get_benchmark
from gauntlet.controllers.oversight.features import History, prefix_features
from gauntlet.controllers.oversight.lapsing import BranchableAgent, derive_seed, plain_action, privileged_input
from gauntlet.controllers.oversight.models import (
    ActionConditioned,
    ModelFile,
    ScalarRouter,
    TwoThresholdRouter,
    choose_from_scores,
    design_matrix,
    load_model,
)
from gauntlet.controllers.oversight.utility import INTERVENTIONS, REVISIONS, UtilityConfig
from gauntlet.episode import Episode, Event
from gauntlet.errors import UserError, check_arguments
from gauntlet.hooks import Decision, Prefix
from gauntlet.info_keys import PRIVILEGED

if TYPE_CHECKING:
    from gauntlet.cli_commands.common import HookTarget

ONLINE_ACTIONS = ("continue", "quit", "expert", "expert_k", "stronger", "hint", "confirm")
"""The overseer actions an online controller can carry out through the runner (``available`` narrows them
per episode)."""
ALWAYS_ONLINE = ("continue", "quit", "expert", "expert_k")
"""The online actions every benchmark and agent allow."""
HANDOVER = "handover"


class _Overseer(ABC):
    """What both online controllers share: the model file, the benchmark, features, and the handover.

    One instance serves many episodes: a prefix with no steps starts a new one (and ends any handover).
    """

    name: str

    def __init__(self, model: str | Path, benchmark: str | Benchmark | None,
                 benchmark_options: Mapping[str, Any] | None, expert_strength: float) -> None:
        self.model_path = Path(model)
        self.file: ModelFile = load_model(model)
        self.utility: UtilityConfig = self.file.utility
        if benchmark is None or isinstance(benchmark, str):
            benchmark = get_benchmark(benchmark or self.file.benchmark, **dict(benchmark_options or {}))
        elif benchmark_options:  # a benchmark object (e.g. one whose models live in this process) is built
            raise ValueError("benchmark_options build a benchmark named by its name; this one is given built")
        self.benchmark: Benchmark = benchmark
        self.expert: BranchableAgent = self.benchmark.make_expert(expert_strength)
        self.strong: BranchableAgent | None = None
        self.available: tuple[str, ...] = ALWAYS_ONLINE
        self._handover_left = 0
        self._handover_action = ""
        self._handing_over: BranchableAgent = self.expert
        self._seed = 0

    @classmethod
    def compose(cls, target: HookTarget, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` if the controller can oversee ``target`` (see the module doc), else ``UserError``
        naming what its expert needs and ``gauntlet oversight deploy``; called before any episode runs.
        Under ``run`` it builds the controller once (checking the config) and reads the env's first reset."""
        if target.command == "eval":
            model, benchmark = config.get("model", "FILE"), config.get("benchmark")
            if benchmark is None and "model" in config:
                try:
                    benchmark = load_model(model).benchmark
                except (OSError, ValueError):
                    pass
            raise UserError(f"controller {cls.name!r} cannot oversee `gauntlet eval {target.env}`: its handovers "
                            "act the expert of the benchmark its model was trained on, which needs that benchmark's "
                            "own env (a task suite's env does not name info['privileged']['expert_action']); deploy "
                            f"it with `gauntlet oversight deploy {benchmark or 'BENCHMARK'} --model {model}`")
        check_arguments(cls, what=f"controller {cls.name!r}", fix="fix --controller-config", **config)
        overseer = cls(**config)
        overseer.check_runnable_without_episodes()
        info = target.reset_info()
        if info is not None:
            overseer.check_expert_input(info, f"{target.env}'s reset info")
        return config

    def check_runnable_without_episodes(self) -> None:
        """``UserError`` if the controller needs what only a run that knows each episode can hand it (``gauntlet
        run`` cannot; ``gauntlet oversight deploy`` can). The action-conditioned controller offers each episode
        only what it can carry out, so nothing stops it."""
        return None

    def check_expert_input(self, info: dict[str, Any], where: str) -> None:
        """``UserError`` unless ``info`` (``where``: what it is, for the message) gives the expert what it acts
        from, pointing to ``gauntlet oversight deploy``, which runs the benchmark's own env."""
        key = privileged_input(self.expert)
        privileged = info.get(PRIVILEGED)
        if key is None or (isinstance(privileged, dict) and key in privileged):
            return
        raise UserError(f"controller {self.name!r} hands over to the {self.benchmark.name} benchmark's expert, which "
                        f"acts info[{PRIVILEGED!r}][{key!r}], and {where} names none; deploy it on the benchmark's own "
                        f"env: `gauntlet oversight deploy {self.benchmark.name} --model {self.model_path}`")

    def for_episode(self, episode: int) -> None:
        """Hand over episode ``episode``'s stronger agent (where the benchmark has one), for ``stronger``;
        call before the episode runs. Without it, ``stronger`` is not available."""
        self.strong = self.benchmark.make_agent(episode, strength="strong") if self.benchmark.has_stronger else None

    def online_actions(self, agent: Any) -> tuple[str, ...]:
        """The online actions this controller can carry out on an episode that ``agent`` runs."""
        takes_over = bool(getattr(self.benchmark, "stronger_takes_over", False))
        stronger = self.strong is not None and (not takes_over or hasattr(agent, "snapshot"))
        revisions = hasattr(self.benchmark, "revised_output") and all(hasattr(agent, name)
                                                                       for name in ("revise", "reply"))
        return (*ALWAYS_ONLINE, *(("stronger",) if stronger else ()),
                *(REVISIONS if revisions else ()))

    def features(self, prefix: Prefix) -> dict[str, float]:
        """The prefix features of ``prefix``, as the branching protocol computes them for a row."""
        history = History.from_steps(prefix.steps, prefix.observation, prefix.info, self.benchmark.max_steps)
        return prefix_features(history, self.benchmark)

    @abstractmethod
    def _choose(self, features: dict[str, float]) -> tuple[str, dict[str, float]]:
        """The overseer action for a prefix with ``features``, and the scores to record with it."""

    def decide(self, prefix: Prefix, candidates: list[Any]) -> Decision:
        t = len(prefix.steps)
        if t == 0:
            self._start_episode(prefix)
        if self._handover_left > 0:
            return self._hand_over(prefix, t)
        action, scores = self._choose(self.features(prefix))
        scores = {"t": float(t), **scores}
        if action == "continue":
            return Decision(kind="continue", reason=action, scores=scores)
        if action == "quit":
            return Decision.intervene("halt", reason=action, scores=scores)
        if action in REVISIONS:
            (proposed,) = candidates
            revised = self.benchmark.revised_output(action, prefix.agent, proposed, prefix.info)  # type: ignore[attr-defined]
            return Decision.intervene("replace_action", action=revised, reason=action, scores=scores)
        # ``expert`` and ``stronger`` last to the end of the episode; no episode runs longer than its budget.
        self._handover_left = self.utility.k if action == "expert_k" else self.benchmark.max_steps
        self._handover_action = action
        self._handing_over = self.expert if action != "stronger" else self.strong  # type: ignore[assignment]
        if action == "stronger" and getattr(self.benchmark, "stronger_takes_over", False):
            # The running agent has written its reply already: the stronger one takes the conversation over and
            # writes that reply again in its own words (``LLMAgent.revise(None)``), where the branching protocol
            # hands it the conversation from before the reply. A reply with nothing to write again (a spent
            # budget) runs as it was.
            self._handover_left -= 1
            strong: Any = self.strong
            strong.restore(prefix.agent.snapshot())
            strong.reseed(derive_seed(self._seed, t))
            (proposed,) = candidates
            output = strong.revise(None) if strong.reply() is not None else proposed
            return Decision.intervene("replace_action", action=_with_proposal_events(output, prefix), reason=action,
                                      scores=scores)
        self._handing_over.reseed(derive_seed(self._seed, t))
        decision = self._hand_over(prefix, t)
        return Decision.intervene("replace_action", action=decision.action, reason=action, scores=scores)

    def _start_episode(self, prefix: Prefix) -> None:
        self.check_expert_input(prefix.info, "this env's reset info")
        self._seed = 0 if prefix.seed is None else int(prefix.seed)
        self._handover_left = 0
        self.available = self.online_actions(prefix.agent)
        for agent in (self.expert, self.strong):
            if agent is not None:
                agent.reset(seed=prefix.seed, observation_space=prefix.env.observation_space,
                            action_space=prefix.env.action_space)

    def _hand_over(self, prefix: Prefix, t: int) -> Decision:
        """One step of the expert (or the stronger agent) in the running agent's place."""
        self._handover_left -= 1
        output = self._handing_over.act(prefix.observation, prefix.info)
        # The stronger LLM agent's output is recorded in place of the proposal: its messages, and the events of
        # both (the running agent's proposal cost its model calls too).
        action = _with_proposal_events(output, prefix) if self._handing_over is self.strong else plain_action(output)
        return Decision.intervene("replace_action", action=action, reason=f"{HANDOVER} ({self._handover_action})",
                                  scores={"t": float(t)})


class OversightController(_Overseer):
    """The action-conditioned overseer online: the argmax of ``mean - dispersion * std`` per prefix.

    ``model``: a file saved by ``models.save_model`` holding an ``ActionConditioned``; ``benchmark``
    (default: the one the model was trained on) and ``benchmark_options`` build the benchmark whose
    features and expert are used (or ``benchmark`` is that benchmark, built: one whose models live in this
    process); ``expert_strength`` weakens the expert (1: the expert itself); ``dispersion`` overrides the
    model's penalty ``lambda``.
    """

    name = "oversight"

    def __init__(self, model: str | Path, benchmark: str | Benchmark | None = None, *,
                 benchmark_options: Mapping[str, Any] | None = None, expert_strength: float = 1.0,
                 dispersion: float | None = None, name: str = "oversight") -> None:
        super().__init__(model, benchmark, benchmark_options, expert_strength)
        if not isinstance(self.file.model, ActionConditioned):
            raise ValueError(f"{model} holds a {self.file.kind}, not an ActionConditioned model; "
                             "deploy a scalar router with ScalarRoutingController")
        self.model: ActionConditioned = self.file.model
        if dispersion is not None:
            self.model.dispersion = dispersion
        self.allowed = [action for action in self.model.actions if action in ONLINE_ACTIONS]
        if "continue" not in self.allowed:
            raise ValueError(f"{model} was trained without the continue action; it cannot oversee online")
        self.name = name

    def _choose(self, features: dict[str, float]) -> tuple[str, dict[str, float]]:
        X, _ = design_matrix([{"features": features}], self.model.feature_names)
        mean, std = self.model.predict(X, return_std=True)
        scores = {}
        for j, action in enumerate(self.model.actions):
            if action in self.allowed and action in self.available:
                scores[f"utility:{action}"] = float(mean[0, j])
                scores[f"dispersion:{action}"] = float(std[0, j])
        (action,) = choose_from_scores(mean - self.model.dispersion * std, self.model.actions, self.allowed_now())
        return action, scores

    def allowed_now(self) -> list[str]:
        """The model's online actions this episode allows (``available``)."""
        return [action for action in self.allowed if action in self.available]


class ScalarRoutingController(_Overseer):
    """The scalar baseline online: a ``ScalarRouter`` (risk above its threshold -> its intervention) or a
    ``TwoThresholdRouter`` (also quit above the second cut), from a file saved by ``models.save_model``.

    Arguments as ``OversightController``'s. The router's intervention must be ``expert`` or ``expert_k``.
    """

    name = "oversight-scalar"

    def __init__(self, model: str | Path, benchmark: str | Benchmark | None = None, *,
                 benchmark_options: Mapping[str, Any] | None = None, expert_strength: float = 1.0,
                 name: str = "oversight-scalar") -> None:
        super().__init__(model, benchmark, benchmark_options, expert_strength)
        if not isinstance(self.file.model, (ScalarRouter, TwoThresholdRouter)):
            raise ValueError(f"{model} holds a {self.file.kind}, not a scalar router; deploy an "
                             "ActionConditioned model with OversightController")
        self.router: ScalarRouter | TwoThresholdRouter = self.file.model
        self.router.thresholds()  # a router saved without its cuts fails here, not at the first step
        if self.router.intervention not in ONLINE_ACTIONS:
            online = [action for action in ONLINE_ACTIONS if action in INTERVENTIONS]
            raise ValueError(f"the router intervenes with {self.router.intervention!r}, which the runner cannot "
                             f"carry out online; online interventions are {online}")
        self.name = name

    def check_runnable_without_episodes(self) -> None:
        """A router escalating to ``stronger`` needs each episode's stronger agent (``for_episode``)."""
        if self.router.intervention == "stronger":
            raise UserError(f"controller {self.name!r} escalates to the stronger agent, which only a run that knows "
                            "each episode can hand it; deploy it with `gauntlet oversight deploy "
                            f"{self.benchmark.name} --model {self.model_path}`")

    def _start_episode(self, prefix: Prefix) -> None:
        super()._start_episode(prefix)
        if self.router.intervention not in self.available:
            raise UserError(f"controller {self.name!r} intervenes with {self.router.intervention!r}, which this "
                            f"episode cannot carry out (it allows {', '.join(self.available)}): `stronger` needs the "
                            "episode's stronger agent (`for_episode`; `gauntlet oversight deploy` hands it over), "
                            "`hint` and `confirm` an LLM benchmark's agent")

    def _choose(self, features: dict[str, float]) -> tuple[str, dict[str, float]]:
        X, _ = design_matrix([{"features": features}], self.router.feature_names)
        risk = self.router.risk.predict_risk(X)
        return self.router.route(risk)[0], {"risk": float(risk[0]), **self.router.thresholds()}


def _with_proposal_events(output: Any, prefix: Prefix) -> Any:
    """``output`` (an ``AgentOutput`` that runs instead of the running agent's proposal) with the proposal's
    events first (``prefix.extra["proposal"]``: the model calls that wrote it), so the step records what both
    cost; anything else as it is."""
    proposal = prefix.extra.get("proposal")
    if type(output) is not AgentOutput or type(proposal) is not AgentOutput:
        return output
    return AgentOutput(action=output.action, tool_call=output.tool_call, messages=output.messages,
                       events=[*proposal.events, *output.events])


# ---------------------------------------------------------------------------------- reading episodes


def _decision_events(episode: Episode, source: str) -> list[Event]:
    events = [event for step in episode.steps for event in step.events]
    events += list(episode.outcome.events) if episode.outcome is not None else []
    return [event for event in events if event.kind == "decision" and event.source == source]


def overseer_choices(episode: Episode, source: str = "oversight") -> list[tuple[int, str]]:
    """``(t, overseer action)`` of every decision the controller named ``source`` made in ``episode``
    (handover steps are not decisions). Needs the episode's steps (recorded in memory or loaded)."""
    choices = []
    for event in _decision_events(episode, source):
        reason = event.data.get("reason", "")
        if not reason.startswith(HANDOVER):
            choices.append((int(event.data["scores"]["t"]), reason))
    return choices


def online_utility(episode: Episode, config: UtilityConfig, source: str = "oversight") -> float:
    """The utility of a whole overseen episode, priced as a branch from ``t = 0`` is.

    ``U = w * success - c_continue - sum of c_a over interventions - s * steps``, with the interventions
    the controller ``source``'s choices other than ``continue`` and ``quit`` (each priced as its branch
    is: ``c_intervene``, ``c_hint`` for a hint, ``c_confirm`` for a confirmation) and ``steps`` the steps
    run; an episode halted before its first step is worth ``u_quit``. An episode without any
    intervention is priced exactly as the ``continue`` branch at ``t = 0``.
    """
    choices = overseer_choices(episode, source)
    if choices and choices[0] == (0, "quit"):
        return config.u_quit
    prices = sum(config.cost(action) for _, action in choices if action in INTERVENTIONS)
    if episode.outcome is None:
        raise ValueError(f"episode {episode.episode_id} has no outcome (it did not finish)")
    success = bool(episode.outcome.success)
    steps = int(episode.outcome.metrics["length"])
    return config.w * success - config.c_continue - prices - config.s * steps
