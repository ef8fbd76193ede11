"""The documentation users get stays inside the repository and names code that exists.

* Every relative link in ``README.md`` and ``docs/*.md`` resolves to a file or directory of
  the repository (and an ``#anchor`` into a Markdown file to one of its headings); no link
  leaves the repository (``../``, absolute paths).
* Every ``platform/...`` path, every ``linkstream.x.y`` module (or module attribute) and
  every ``Class.attribute`` named in ``docs/architecture.md`` exists, and so does every
  other identifier in its code spans (a word of the source), so a rename cannot leave the
  architecture page describing code that is gone.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PLATFORM = REPO / "platform"
ARCHITECTURE = REPO / "docs" / "architecture.md"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def _prose(path: Path) -> str:
    """The Markdown text of ``path`` without fenced code blocks (their brackets are no links)."""
    return _FENCE.sub("", path.read_text(encoding="utf-8"))


def _links(path: Path) -> list[str]:
    text = _prose(path)
    return [m.group(1) for m in _INLINE_LINK.finditer(text)] + [m.group(1) for m in _REF_LINK.finditer(text)]


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    # emphasis markers go, but a code span keeps its underscores (`GET /_cluster/results`)
    parts = re.split(r"(`[^`]*`)", heading)
    text = "".join(p[1:-1] if p.startswith("`") else re.sub(r"[*_]", "", p) for p in parts).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def _anchors(path: Path) -> frozenset[str]:
    return frozenset(_slug(h) for h in _HEADING.findall(_prose(path)))


def _relative_links() -> list[tuple[Path, str]]:
    out = []
    for doc in DOCS:
        for target in _links(doc):
            if _SCHEME.match(target):
                continue  # http:, https:, mailto: ...
            out.append((doc, target))
    return out


def test_docs_exist() -> None:
    for name in ("architecture.md", "semantics.md"):
        assert (REPO / "docs" / name).is_file(), f"docs/{name} is missing"
    assert len(_relative_links()) >= 5, "the link extraction found (almost) no links"


@pytest.mark.parametrize(
    ("doc", "target"), _relative_links(), ids=lambda x: x.name if isinstance(x, Path) else x
)
def test_relative_link_resolves_inside_the_repository(doc: Path, target: str) -> None:
    where = f"{doc.relative_to(REPO)}: link {target!r}"
    path_part, _, anchor = target.partition("#")
    assert not path_part.startswith("/"), f"{where} is an absolute path"
    dest = (doc.parent / path_part).resolve() if path_part else doc
    assert dest == REPO or REPO in dest.parents, f"{where} leaves the repository"
    assert dest.exists(), f"{where} points to a missing file"
    if anchor and dest.suffix == ".md":
        assert anchor in _anchors(dest), f"{where}: no heading with anchor #{anchor} in {dest.name}"


def test_no_link_to_the_shared_directory() -> None:
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        assert "](../" not in text, f"{doc.relative_to(REPO)} links outside the repository"


# ---------------------------------------------------------------- docs/architecture.md


def _architecture() -> str:
    return ARCHITECTURE.read_text(encoding="utf-8")


def test_platform_paths_exist() -> None:
    paths = set(re.findall(r"platform/[\w/.]*\w/?", _architecture()))
    assert len(paths) > 20
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing, f"docs/architecture.md names missing paths: {missing}"


def _module_file(dotted: str) -> Path | None:
    """The source file of module ``linkstream.<dotted>`` (a package's ``__init__.py``)."""
    base = PLATFORM.joinpath(*dotted.split("."))
    # (a compiled module is named by its type stub, ``.pyi``)
    for f in (base.with_suffix(".py"), base.with_suffix(".pyi"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _top_level_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in _tree(path).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_linkstream_modules_exist() -> None:
    named = set(re.findall(r"\blinkstream(?:\.\w+)+", _architecture()))
    assert named
    problems = []
    for dotted in sorted(named):
        parts = dotted.split(".")[1:]
        k = len(parts)
        while k and _module_file(".".join(parts[:k])) is None:
            k -= 1
        if not k:
            problems.append(f"{dotted}: no such module")
        elif k < len(parts):
            module = _module_file(".".join(parts[:k]))
            assert module is not None
            if parts[k] not in _top_level_names(module) or len(parts) > k + 1:
                problems.append(f"{dotted}: linkstream.{'.'.join(parts[:k])} has no {parts[k]!r}")
    assert not problems, "docs/architecture.md names missing modules:\n" + "\n".join(problems)


@cache
def _classes() -> dict[str, list[tuple[set[str], list[str]]]]:
    """Every class of the package: its own attribute names and its base class names."""
    out: dict[str, list[tuple[set[str], list[str]]]] = {}
    for f in PLATFORM.rglob("*.py"):
        for node in ast.walk(_tree(f)):
            if not isinstance(node, ast.ClassDef):
                continue
            attrs: set[str] = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    attrs.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    attrs.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    attrs.update(t.id for t in item.targets if isinstance(t, ast.Name))
            for sub in ast.walk(node):  # self.x = ... in any method
                targets = []
                if isinstance(sub, ast.Assign):
                    targets = sub.targets
                elif isinstance(sub, ast.AnnAssign):
                    targets = [sub.target]
                attrs.update(
                    t.attr
                    for t in targets
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                )
            bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
            out.setdefault(node.name, []).append((attrs, bases))
    return out


def _has_attribute(cls: str, attr: str, seen: frozenset[str] = frozenset()) -> bool:
    for attrs, bases in _classes().get(cls, []):
        if attr in attrs:
            return True
        if any(b not in seen and _has_attribute(b, attr, seen | {cls}) for b in bases):
            return True
    return False


@cache
def _source_words() -> frozenset[str]:
    words: set[str] = set()
    for f in PLATFORM.rglob("*.py"):
        words.update(re.findall(r"\w+", f.read_text(encoding="utf-8")))
    return frozenset(words)


def test_class_attributes_exist() -> None:
    spans = _CODE_SPAN.findall(_architecture())
    checked = 0
    problems = []
    for span in spans:
        m = re.match(r"^([A-Z]\w*)\.(\w+)", span)
        if not m:
            continue
        cls, attr = m.groups()
        if cls not in _classes():
            problems.append(f"`{span}`: no class {cls}")
        elif not _has_attribute(cls, attr):
            problems.append(f"`{span}`: {cls} has no attribute {attr}")
        checked += 1
    assert checked > 10
    assert not problems, "docs/architecture.md names missing code:\n" + "\n".join(problems)


def test_code_identifiers_exist() -> None:
    """CamelCase and snake_case names in code spans are words of the source (renames show)."""
    words = _source_words()
    problems = []
    for span in _CODE_SPAN.findall(_architecture()):
        for name in re.findall(r"(?<![\w./:-])([A-Z][a-z]\w*|[a-z]\w*_\w+)(?![\w/-])", span):
            if name not in words:
                problems.append(f"`{span}`: {name}")
    assert not problems, "docs/architecture.md names identifiers the source lacks:\n" + "\n".join(problems)
