"""Registers the chem pricing server, its data builder, its task suites and demo (string targets only).

Every suite is one view of the benchmark (``chem`` is the clean view); each names the chem scorer in
its ``env_kwargs`` (so ``gauntlet eval`` records the stage diagnosis in every episode; the attack view's
adds the attack's metrics to it) and lists the views of the family under ``views``, so a runner can
pick one by view name (``gauntlet eval chem --view noisy-high``, ``--view attack``).
"""

from __future__ import annotations

PACKAGE = "gauntlet.mcp_servers.chem"
# suite name: (view, what its tasks are); every suite is ``suite.suite_path`` with its view bound
SUITES = {"chem": ("clean", "1,440 reactions, clean"),
          "chem-solvents": ("solvents", "1,440 reactions, solvents priced by volume"),
          "chem-noisy-low": ("noisy-low", "1,440 reactions, low noise"),
          "chem-noisy-medium": ("noisy-medium", "1,440 reactions, medium noise"),
          "chem-noisy-high": ("noisy-high", "1,440 reactions, high noise"),
          "chem-routes": ("routes", "150 multi-step routes cascading intermediates"),
          "chem-routes-noisy-low": ("routes-noisy-low", "150 multi-step routes, low noise"),
          "chem-routes-noisy-medium": ("routes-noisy-medium", "150 multi-step routes, medium noise"),
          "chem-routes-noisy-high": ("routes-noisy-high", "150 multi-step routes, high noise")}
ATTACK_SUITE = "chem-attack"  # the clean tasks with injected instructions in tool results (attack.py)
VIEWS = {**{view: name for name, (view, _) in SUITES.items()}, "attack": ATTACK_SUITE}
SCORER = f"{PACKAGE}.scoring:ChemScorer"
# `gauntlet eval chem --agent llm` puts the tasks as ChemCost does (the LLM agent's `chemcost` mode: its
# procurement prompt and an answer tool typed as one number), unless --mode or the agent config says otherwise
MODES = {"chemcost": {"agent_config": {"mode": "chemcost"}}}
DEFAULT_MODE = "chemcost"


def register() -> None:
    from gauntlet.registry import registry

    registry.add("server", "chem", f"{PACKAGE}.server:build_server",
                 "chemical procurement pricing: ground chemicals, supplier quotes, pack selection, reactions, routes")
    registry.add("data", "chem", f"{PACKAGE}.bundle:build_everything",
                 "frozen chemical catalogue (25,000 real identities, 120 suppliers, ~2.9M quotes) in SQLite, the "
                 "1,440 reactions and 150 routes with their views, and every suite", version="4",
                 inputs=("chem/aliases.json", "chem/salt_formulas.json"))
    for name, (view, tasks) in SUITES.items():
        registry.add("suite", name, f"{PACKAGE}.suite:suite_path",
                     f"price {tasks} ({view} view); gold trajectories from the oracle", params={"view": view},
                     server="chem", env_kwargs={"scorer": SCORER}, view=view, views=VIEWS, modes=MODES,
                     default_mode=DEFAULT_MODE)
    registry.add("server", "chem-attack", f"{PACKAGE}.attack:build_attack_server",
                 "the chem server of the attack view: the same tools and results, with an injected instruction "
                 "planted in one result each attack task's gold trajectory reads")
    registry.add("suite", ATTACK_SUITE, f"{PACKAGE}.attack:attack_suite_path",
                 "price 1,440 reactions (clean view) through a server that plants prompt injections; scores "
                 "utility, attack success and injection seen", server="chem-attack",
                 env_kwargs={"scorer": f"{PACKAGE}.attack:attack_scorer"}, view="attack", views=VIEWS, modes=MODES,
                 default_mode=DEFAULT_MODE)
    registry.add("demo", "chem", f"{PACKAGE}.demo:run_demo",
                 "price a few reactions through the chem server over a real MCP client session")
