"""What every command shares: the console, JSON options, and agent and hook construction from options."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import typer
from pydantic import ValidationError
from rich.console import Console

from gauntlet.agent import Agent
from gauntlet.errors import UserError, check_arguments
from gauntlet.registry import make_agent, make_hook, registry

if TYPE_CHECKING:
    from gauntlet.batch import HookSpec

console = Console(highlight=False)

# Options several commands take, spelled once.
AgentConfigOption = Annotated[str | None, typer.Option(help="Agent keyword arguments as a JSON object.")]
EnvKwargsOption = Annotated[str | None, typer.Option(help="gymnasium.make keyword arguments as a JSON object.")]
ControllerOption = Annotated[str | None, typer.Option("--controller", help=(
    "A registered controller that decides before every step (see `gauntlet list`): it may replace the "
    "agent's action or halt the episode, and every decision is recorded."))]
ControllerConfigOption = Annotated[str | None, typer.Option(help="Controller keyword arguments as a JSON object.")]
MonitorOption = Annotated[str | None, typer.Option("--monitor", help=(
    "A registered monitor that scores every step (see `gauntlet list`); its scores are recorded."))]
MonitorConfigOption = Annotated[str | None, typer.Option(help="Monitor keyword arguments as a JSON object.")]


class Backend(StrEnum):
    """Where a command's jobs run: local worker processes, or a Ray cluster."""

    local = "local"
    ray = "ray"


def parse_json(option: str, text: str) -> Any:
    """The value of a JSON option; ``UserError`` naming the option when it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{option} is not valid JSON ({exc.msg} at character {exc.pos}); "
                        f"""quote it for the shell, e.g. {option} '{{"key": 1}}'""") from None


def parse_json_object(option: str, text: str | None) -> dict[str, Any]:
    """A JSON option that must be an object (keyword arguments); empty when the option is absent."""
    if text is None:
        return {}
    value = parse_json(option, text)
    if not isinstance(value, dict):
        raise UserError(f"{option} must be a JSON object of keyword arguments, e.g. {option} "
                        f"""'{{"key": 1}}', not {text}""")
    return value


def build_agent(name: str, config: dict[str, Any]) -> Agent:
    """The registered agent ``name`` built with ``config``; ``UserError`` if the config does not fit it
    (arguments it does not take, or values its pydantic config model rejects)."""
    check_arguments(registry.get("agent", name).load(), what=f"agent {name!r}", fix="fix --agent-config", **config)
    try:
        return cast(Agent, make_agent(name, **config))
    except ValidationError as exc:
        raise UserError(f"agent {name!r} rejects --agent-config: {validation_problems(exc)}; "
                        "fix --agent-config") from None


def validation_problems(exc: ValidationError) -> str:
    """A pydantic error as one line: ``field: problem`` for each field."""
    return "; ".join(f"{'.'.join(map(str, error['loc'])) or 'value'}: {error['msg']}" for error in exc.errors())


@dataclass
class HookTarget:
    """What a command's controllers and monitors will watch, known before any episode runs: the command
    (``run`` or ``eval``), the env id (``run``) or task suite (``eval``), the agent (its registered name),
    and every hook the command names (``hooks``, by kind), so that a hook can see its partner.

    A hook class states what it needs with a classmethod ``compose(target, config) -> config``. It is
    called before anything is built or run: it raises ``UserError`` with one line naming the hook, what it
    needs and the command that provides it when it cannot watch this target, checks its config, and
    returns the config the run's workers build it with. The driver does not build a hook whose class
    has ``compose`` (so a refusal costs nothing, and no model is loaded in the driver as well); a hook
    without it is built here once to check its config.
    """

    command: Literal["run", "eval"]
    env: str
    agent: str
    agent_config: dict[str, Any] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    hooks: dict[str, HookSpec] = field(default_factory=dict)
    _reset_info: dict[str, Any] | None = field(default=None, init=False, repr=False)

    def agent_offers(self, method: str) -> bool:
        """Whether the agent's class has ``method`` (e.g. ``revise``: the llm agent's reply interface)."""
        target = registry.get("agent", self.agent).load()
        return callable(getattr(getattr(target, "func", target), method, None))  # func: a partial's class

    def reset_info(self) -> dict[str, Any] | None:
        """The info of the run's first reset (its env made, reset with episode 0's seed, closed), for a hook
        whose input is in it; None for an evaluation, whose tasks each make their own env."""
        if self.command != "run":
            return None
        if self._reset_info is None:
            import gymnasium as gym

            from gauntlet.registry import env_spec
            from gauntlet.runner import episode_seed

            env = gym.make(env_spec(self.env), **self.env_kwargs)
            try:
                self._reset_info = dict(env.reset(seed=episode_seed(self.seed, 0))[1] or {})
            finally:
                env.close()
        return self._reset_info


def hook_specs(controller: str | None, controller_config: str | None, monitor: str | None,
               monitor_config: str | None, target: HookTarget) -> list[HookSpec]:
    """The run's hooks from the command's options, each checked here against ``target`` (its class's
    ``compose``, see ``HookTarget``) or else built once, so that a hook that cannot watch this run, or a
    bad name or config, fails with one line before any worker starts or any episode file is written."""
    from gauntlet.batch import HookSpec

    named: list[tuple[str, str, dict[str, Any], Any]] = []
    for kind, name, text in (("controller", controller, controller_config), ("monitor", monitor, monitor_config)):
        option = f"--{kind}-config"
        if name is None:
            if text is not None:
                raise UserError(f"{option} configures a {kind}; add --{kind} NAME (see `gauntlet list`)")
            continue
        named.append((kind, name, parse_json_object(option, text), registry.get(kind, name).load()))
    target.hooks = {kind: HookSpec(kind=kind, name=name, config=config)  # type: ignore[arg-type]
                    for kind, name, config, _ in named}
    specs: list[HookSpec] = []
    for kind, name, config, hook_class in named:
        option = f"--{kind}-config"
        compose = getattr(hook_class, "compose", None)
        try:
            if compose is not None:
                config = compose(target, config)
            else:
                check_arguments(hook_class, what=f"{kind} {name!r}", fix=f"fix {option}", **config)
                make_hook(kind, name, **config)
        except ValidationError as exc:
            raise UserError(f"{kind} {name!r} rejects {option}: {validation_problems(exc)}; fix {option}") from None
        except (FileNotFoundError, ValueError) as exc:
            raise UserError(f"{kind} {name!r} cannot start with {option} {json.dumps(config)}: {exc}; "
                            f"fix {option}") from None
        specs.append(HookSpec(kind=kind, name=name, config=config))  # type: ignore[arg-type]
    return specs
