"""Multi-step routes: chains of template steps in which the product of step k is a reactant of step k+1.

A route starts like a single-step reaction (a class's template on catalogue building blocks). Its
product becomes the *intermediate* of the next step: the generator looks for a class whose reactant
pattern the intermediate fits (one site, no competing group, up to ``MAX_INTERMEDIATE_HEAVY_ATOMS``),
draws the partner (if the class takes two reactants) from that class's pool, runs the template and
keeps the step when its product is new to the route (so Boc protection is never undone by the very
next step). Typical chains: bromobenzoic acid -> amide -> Suzuki biaryl; bromobenzaldehyde ->
reductive amination -> Boc protection -> Suzuki -> Boc deprotection.

In every later step the intermediate is the limiting reagent (1.0 equiv, role ``intermediate``) and
is *made, not bought*: it has no catalogue id, and the route's gold rule (``gold.price_route``) runs
each step on all of the intermediate the step before gave. Conditions, yields and procedure texts
come from the same protocols as single steps. Generation is seeded and deterministic.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from gauntlet.mcp_servers.chem_pricing.reactions import (
    INTERMEDIATE_ROLE,
    YIELD_RANGE_PCT,
    ClassKit,
    Component,
    Reaction,
    StepFactory,
    procedure_text,
)
from gauntlet.mcp_servers.chem_pricing.store import CatalogueStore

MAX_INTERMEDIATE_HEAVY_ATOMS = 40
MAX_ROUTE_STEPS = 4
# Longer routes are rarer in practice and in the data: after each step past the second, stop with this chance.
STOP_PROBABILITY = 0.45
MAX_ROUTE_ATTEMPTS = 60_000
PARTNER_DRAWS = 6


@dataclass
class Route:
    route_id: str
    steps: list[Reaction]

    @property
    def product_smiles(self) -> str:
        return self.steps[-1].product_smiles

    @property
    def product_molar_mass_g_mol(self) -> float:
        return self.steps[-1].product_molar_mass_g_mol

    def to_json(self) -> dict:
        return {"route_id": self.route_id, "steps": [step.to_json() for step in self.steps]}

    @classmethod
    def from_json(cls, data: dict) -> Route:
        return cls(data["route_id"], [Reaction.from_json(step) for step in data["steps"]])


def intermediate_name(step_number: int) -> str:
    """How a later step names the intermediate made by step ``step_number``."""
    return f"product of step {step_number}"


def _first_step(factory: StepFactory, kit: ClassKit, rng: random.Random, route_id: str) -> Reaction | None:
    reactant_ids = [rng.choice(pool) for pool in kit.pools]
    if len(set(reactant_ids)) != len(reactant_ids):
        return None
    facts = factory.run(kit, tuple(factory.molecules[cid] for cid in reactant_ids))
    names = [factory.spelling(cid) for cid in reactant_ids]
    if facts is None or None in names:
        return None
    components = [Component(names[0], "limiting reagent", reactant_ids[0], equiv=1.0)]
    if len(reactant_ids) > 1:
        components.append(Component(names[1], "coupling partner", reactant_ids[1],
                                    equiv=rng.choice(kit.reaction_class.partner_equiv)))
    return _step(factory, kit, rng, f"{route_id}.1", components, facts)


def _step(factory: StepFactory, kit: ClassKit, rng: random.Random, step_id: str, reactants: list[Component],
          facts) -> Reaction:
    components = reactants + factory.conditions(kit, rng)
    yield_pct = float(rng.randint(*YIELD_RANGE_PCT))
    return Reaction(reaction_id=step_id, reaction_class=kit.reaction_class.name, components=components,
                    product_smiles=facts.smiles, product_molar_mass_g_mol=facts.molar_mass_g_mol,
                    yield_pct=yield_pct, procedure=procedure_text(kit.reaction_class, components, yield_pct))


def _next_step(factory: StepFactory, previous: Reaction, step_number: int, rng: random.Random, route_id: str,
               seen_smiles: set[str]) -> Reaction | None:
    """A step that consumes ``previous``'s product, or None when no class takes it."""
    from rdkit import Chem

    intermediate = Chem.MolFromSmiles(previous.product_smiles)
    options = [(kit, slot) for kit in factory.classes if all(kit.pools)
               for slot, pattern in enumerate(kit.patterns)
               if factory.fits(intermediate, pattern, MAX_INTERMEDIATE_HEAVY_ATOMS)]
    rng.shuffle(options)
    for kit, slot in options:
        partner_slots = [i for i in range(len(kit.patterns)) if i != slot]
        for _ in range(PARTNER_DRAWS if partner_slots else 1):
            partners = {i: rng.choice(kit.pools[i]) for i in partner_slots}
            reactants = tuple(intermediate if i == slot else factory.molecules[partners[i]]
                              for i in range(len(kit.patterns)))
            facts = factory.run(kit, reactants)
            if facts is None or facts.smiles in seen_smiles:
                continue
            names = {i: factory.spelling(cid) for i, cid in partners.items()}
            if None in names.values():
                continue
            components = [Component(intermediate_name(step_number - 1), INTERMEDIATE_ROLE, None, equiv=1.0)]
            components += [Component(names[i], "coupling partner", partners[i],
                                     equiv=rng.choice(kit.reaction_class.partner_equiv)) for i in partner_slots]
            return _step(factory, kit, rng, f"{route_id}.{step_number}", components, facts)
    return None


def generate_routes(catalogue: CatalogueStore, n_routes: int, seed: int,
                    factory: StepFactory | None = None) -> list[Route]:
    """Up to ``n_routes`` routes of 2 to ``MAX_ROUTE_STEPS`` steps (see the module docstring); fewer only
    when ``MAX_ROUTE_ATTEMPTS`` first steps found no more new chains."""
    factory = factory or StepFactory(catalogue)
    rng = random.Random(f"{seed}|routes")
    starters = [kit for kit in factory.classes if all(kit.pools)]
    routes: list[Route] = []
    seen_chains: set[tuple[str, ...]] = set()
    for _ in range(MAX_ROUTE_ATTEMPTS):
        if len(routes) >= n_routes:
            break
        route_id = f"ROUTE-{len(routes) + 1:04d}"
        first = _first_step(factory, rng.choice(starters), rng, route_id)
        if first is None:
            continue
        steps = [first]
        seen_smiles = {first.product_smiles} | {
            factory.catalogue.chemical(c.chemical_id).smiles for c in first.components if c.role != "solvent"}
        while len(steps) < MAX_ROUTE_STEPS:
            step = _next_step(factory, steps[-1], len(steps) + 1, rng, route_id, seen_smiles)
            if step is None:
                break
            steps.append(step)
            seen_smiles.add(step.product_smiles)
            if len(steps) >= 2 and rng.random() < STOP_PROBABILITY:
                break
        chain = tuple(step.product_smiles for step in steps)
        if len(steps) < 2 or chain in seen_chains:
            continue
        seen_chains.add(chain)
        routes.append(Route(route_id, steps))
    return routes
