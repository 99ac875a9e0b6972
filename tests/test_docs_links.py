"""Every relative link of the README and the docs leads somewhere, and every doc page the code names exists.

A link is a Markdown inline link or image, ``[text](target)``, outside fenced code blocks and inline
code. A relative target must be an existing file or folder (resolved from the page that holds the link);
a ``#anchor`` must be a heading of the target page (or of the page itself), with the anchor GitHub
gives the heading. Web links (``http:``, ``https:``, ``mailto:``) are not fetched.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The code folders whose docstrings, comments and help texts may name a doc page (``docs/NAME.md``).
CODE_FOLDERS = ("core", "agents", "controllers", "envs", "mcp_servers", "bench", "experiments", "tests")

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+).+?\1")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
DOC_NAMED_IN_CODE = re.compile(r"\bdocs/[\w./-]*?\.md\b")


def markdown_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the text outside fenced code blocks, with inline code blanked out."""
    lines: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, INLINE_CODE.sub("", line)))
    return lines


def heading_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: its text (links reduced to their text, no markup) lower-cased,
    punctuation dropped, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a Markdown text; a repeated heading gets ``-1``, ``-2``... as on GitHub."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            anchor = heading_anchor(match.group(1))
            repeats = seen.get(anchor, 0)
            found.add(anchor if repeats == 0 else f"{anchor}-{repeats}")
            seen[anchor] = repeats + 1
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """The links of ``page`` that lead nowhere, each as 'page:line: target (why)', the page named from ``root``."""
    problems = []
    text = page.read_text()
    for number, line in prose_lines(text):
        for match in LINK.finditer(line):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # a web or mail address
            path_part, _, anchor = target.partition("#")
            destination = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(root)}:{number}: {target}"
            if not destination.exists():
                problems.append(f"{where} (no such file)")
            elif anchor and destination.suffix == ".md" and anchor not in anchors(destination.read_text()):
                problems.append(f"{where} (no heading with that anchor in {destination.name})")
    return problems


def test_every_relative_link_in_the_readme_and_docs_resolves():
    problems = [problem for page in markdown_pages() for problem in broken_links(page)]
    assert not problems, "links that lead nowhere:\n" + "\n".join(problems)


def test_every_doc_page_the_code_names_exists():
    missing = []
    for folder in CODE_FOLDERS:
        for source in sorted((ROOT / folder).rglob("*.py")):
            if source == Path(__file__).resolve():
                continue  # this file's own examples
            for number, line in enumerate(source.read_text(errors="replace").splitlines(), start=1):
                for name in DOC_NAMED_IN_CODE.findall(line):
                    if not (ROOT / name).is_file():
                        missing.append(f"{source.relative_to(ROOT)}:{number}: {name}")
    assert not missing, "doc pages named in code that do not exist:\n" + "\n".join(missing)


def test_the_link_rule_reports_a_missing_file_and_a_missing_anchor(tmp_path):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "use.md").write_text("# Use it\n\n## The `--view` option: hard, clean\n")
    page = tmp_path / "docs" / "results" / "page.md"
    page.write_text("\n".join([
        "# Results", "## Results", "",
        "[fine](../use.md#the---view-option-hard-clean) [self](#results-1) [web](https://example.org/x.md)",
        "`[in code](missing.md)`", "```", "[in a fence](missing.md)", "```",
        "[gone](../gone.md) [bad anchor](../use.md#no-such-heading) [bad self](#nowhere)"]))
    assert broken_links(page, tmp_path) == [
        "docs/results/page.md:9: ../gone.md (no such file)",
        "docs/results/page.md:9: ../use.md#no-such-heading (no heading with that anchor in use.md)",
        "docs/results/page.md:9: #nowhere (no heading with that anchor in page.md)",
    ]
