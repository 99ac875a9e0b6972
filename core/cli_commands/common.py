"""What every command shares: the console, JSON options, and agent and hook construction from options."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, cast

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


def hook_specs(controller: str | None, controller_config: str | None, monitor: str | None,
               monitor_config: str | None) -> list[HookSpec]:
    """The run's hooks from the command's options, each built once here so that a bad name or config
    fails with one line before any worker starts."""
    from gauntlet.batch import HookSpec

    specs: list[HookSpec] = []
    for kind, name, text in (("controller", controller, controller_config), ("monitor", monitor, monitor_config)):
        option = f"--{kind}-config"
        if name is None:
            if text is not None:
                raise UserError(f"{option} configures a {kind}; add --{kind} NAME (see `gauntlet list`)")
            continue
        config = parse_json_object(option, text)
        check_arguments(registry.get(kind, name).load(), what=f"{kind} {name!r}", fix=f"fix {option}", **config)
        try:
            make_hook(kind, name, **config)
        except ValidationError as exc:
            raise UserError(f"{kind} {name!r} rejects {option}: {validation_problems(exc)}; fix {option}") from None
        except (FileNotFoundError, ValueError) as exc:
            raise UserError(f"{kind} {name!r} cannot start with {option} {json.dumps(config)}: {exc}; "
                            f"fix {option}") from None
        specs.append(HookSpec(kind=kind, name=name, config=config))  # type: ignore[arg-type]
    return specs
