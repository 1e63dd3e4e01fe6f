"""Skills: `SKILL.md` files (the AgentSkills layout) offered to the LLM as the phi-core peer does.

Each skill lives in its own folder holding a `SKILL.md`: YAML front matter with `name` and
`description`, then the instructions. The LLM sees an `<available_skills>` index appended to
the system prompt and reads a skill's body on demand through the `read_skill` tool, whose calls
and results are recorded like any tool's. The run's definition (`RunStarted.skills`) records
each skill's name, description, source and a digest of its body, so that a replay with changed
skills diverges at its first fact, and a replay without the skill files still works (the tool's
results are served from the log).

The front matter is read by a small strict parser (no YAML library): `key: value` lines, quoted
or plain values, plain values continued on indented lines, `|` and `>` block values, and nested
blocks (indented lines under a key with no value), which are kept out of the way.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from pydantic import BaseModel, ConfigDict

from .errors import BuildError

__all__ = [
    "READ_SKILL_TOOL",
    "SKILL_FILE",
    "Skill",
    "SkillSet",
    "load_skill",
    "parse_front_matter",
    "skill_index",
    "with_skill_index",
]

SKILL_FILE = "SKILL.md"
READ_SKILL_TOOL = "read_skill"
"""The name of the tool through which the LLM reads a skill's instructions."""

_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:(?:\s+(.*)|\s*)$")


class Skill(BaseModel):
    """One skill as the run records it: name, description, where it came from (`dir:N`, the
    N-th directory given to `skills()`, never a path, which differs from one machine to the
    next) and a digest of its body."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str
    source: str
    digest: str

    def __repr__(self) -> str:
        return f"Skill({self.name!r}, source={self.source!r}, digest={self.digest[:8]!r})"


def _digest(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()[:32]


def _unquote(value: str, where: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        if value[0] == "'":
            return inner.replace("''", "'")
        return (
            inner.replace('\\"', '"')
            .replace("\\n", "\n")
            .replace("\\t", "\t")
            .replace("\\\\", "\\")
        )
    if value[:1] in "\"'":
        raise BuildError(f"{where}: the value {value!r} opens a quote it does not close.")
    if " #" in value:
        value = value.split(" #", 1)[0].rstrip()  # a YAML comment after a plain value
    return value


def parse_front_matter(text: str, where: str = "SKILL.md") -> tuple[dict[str, str], str]:
    """The front matter's top-level `key: value` pairs (nested blocks are skipped) and the body
    after it. Raises BuildError naming `where` when there is no front matter or a line cannot
    be read."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise BuildError(
            f"{where} has no front matter: it must start with a line '---', then 'name: ...' "
            "and 'description: ...' lines, then '---'."
        )
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
    except StopIteration:
        raise BuildError(
            f"{where}: the front matter opened by '---' on line 1 is never closed; add a line "
            "'---' after its last key."
        ) from None
    values: dict[str, str] = {}
    i = 1
    while i < end:
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        if line[:1] in " \t":
            raise BuildError(
                f"{where}, line {i + 1}: {line.strip()!r} is indented but belongs to no key; "
                "front matter lines are 'key: value'."
            )
        match = _KEY.match(line)
        if match is None:
            raise BuildError(
                f"{where}, line {i + 1}: {line!r} is not a 'key: value' line; front matter "
                "lines are 'key: value' (quote values that hold ': ')."
            )
        key, raw = match.group(1), (match.group(2) or "").strip()
        if key in values:
            raise BuildError(f"{where}, line {i + 1}: the key {key!r} is given twice.")
        block: list[str] = []
        j = i + 1
        while j < end and (not lines[j].strip() or lines[j][:1] in " \t"):
            block.append(lines[j])
            j += 1
        while block and not block[-1].strip():
            block.pop()
        where_key = f"{where}, line {i + 1}"
        if raw in ("|", ">", "|-", ">-", "|+", ">+"):
            text_lines = [b.strip() for b in block]
            if raw.startswith("|"):
                value = "\n".join(text_lines)
            else:
                value = " ".join(t for t in text_lines if t)
        elif not raw:
            value = ""  # a nested block (a mapping or a list): not a value of ours
        elif block:
            if raw[:1] in "\"'":
                raw = " ".join([raw, *(b.strip() for b in block)])
                value = _unquote(raw, where_key)
            else:
                value = " ".join([_unquote(raw, where_key), *(b.strip() for b in block)])
        else:
            value = _unquote(raw, where_key)
        values[key] = value
        i = j
    body = "\n".join(lines[end + 1 :]).strip("\n")
    return values, body


@dataclass(frozen=True)
class _Entry:
    skill: Skill
    body: str | None
    path: Path | None


def load_skill(path: str | Path, source: str = "dir:0") -> tuple[Skill, str]:
    """One `SKILL.md` file: the skill and its body. Raises BuildError naming the file when it
    cannot be read, has no front matter, or lacks a name or a description."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BuildError(f"Cannot read the skill file {file}: {e}.") from e
    values, body = parse_front_matter(text, str(file))
    for key in ("name", "description"):
        if not values.get(key, "").strip():
            raise BuildError(
                f"{file}: the front matter has no {key}; add a line '{key}: ...' between the "
                "'---' lines."
            )
    name = values["name"].strip()
    if any(c.isspace() or c in "<>&\"'" for c in name):
        raise BuildError(
            f"{file}: the skill name {name!r} holds spaces or markup characters; use letters, "
            "digits and '-' (for example 'pdf-forms')."
        )
    skill = Skill(
        name=name,
        description=" ".join(values["description"].split()),
        source=source,
        digest=_digest(body),
    )
    return skill, body


class SkillSet:
    """Skills by name, loaded from directories (later directories win on a name clash), or
    restored from a run's record (without bodies: a replay serves `read_skill` from the log)."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._dirs = 0

    @classmethod
    def load(cls, *dirs: str | Path) -> SkillSet:
        """The skills in these directories, each in its own sub-folder with a `SKILL.md`."""
        skills = cls()
        for directory in dirs:
            skills.load_dir(directory)
        return skills

    @classmethod
    def recorded(cls, skills: Iterable[Skill]) -> SkillSet:
        """The skills a run recorded, without their bodies."""
        restored = cls()
        for skill in skills:
            restored._entries[skill.name] = _Entry(skill, None, None)
        return restored

    def load_dir(self, directory: str | Path) -> SkillSet:
        """Add the skills of one directory (source `dir:N`, N counting the directories loaded
        into this set); they replace skills of the same name. A directory that holds a
        `SKILL.md` itself is one skill; one that holds no skill at all is a BuildError."""
        root = Path(directory)
        if not root.is_dir():
            raise BuildError(
                f"The skills directory {root} does not exist (or is not a directory); give a "
                "directory holding one folder per skill, each with a SKILL.md."
            )
        source = f"dir:{self._dirs}"
        self._dirs += 1
        files = [root / SKILL_FILE] if (root / SKILL_FILE).is_file() else []
        if not files:
            files = [d / SKILL_FILE for d in sorted(root.iterdir()) if (d / SKILL_FILE).is_file()]
        if not files:  # a misspelt SKILL.md or a wrong level would offer no skill, silently
            raise BuildError(
                f"The skills directory {root} holds no skill: neither {root / SKILL_FILE} nor "
                f"any {root}/*/{SKILL_FILE} exists; give the directory that holds one folder "
                f"per skill, each with a file named exactly {SKILL_FILE}."
            )
        seen: dict[str, Path] = {}
        for file in files:
            skill, body = load_skill(file, source)
            if skill.name in seen:
                raise BuildError(
                    f"Two skills in {root} are named {skill.name!r} ({seen[skill.name]} and "
                    f"{file}); rename one."
                )
            seen[skill.name] = file
            self._entries[skill.name] = _Entry(skill, body, file)
        return self

    def merge(self, other: SkillSet) -> SkillSet:
        """Add another set's skills; they replace skills of the same name."""
        self._entries.update(other._entries)
        self._dirs += other._dirs
        return self

    @property
    def skills(self) -> tuple[Skill, ...]:
        """The skills, sorted by name: what the run records and the index lists."""
        return tuple(self._entries[name].skill for name in sorted(self._entries))

    def body(self, name: str) -> str | None:
        """The instructions of a skill (None for a recorded skill, whose body is in the log's
        `read_skill` results only)."""
        entry = self._entries.get(name)
        return entry.body if entry is not None else None

    def path(self, name: str) -> Path | None:
        """The `SKILL.md` a skill was loaded from (None for a recorded skill)."""
        entry = self._entries.get(name)
        return entry.path if entry is not None else None

    def read(self, name: str) -> str:
        """What `read_skill(name)` answers: the skill's instructions. A name that is no skill
        raises ValueError listing the skills (the LLM sees it as the tool's error)."""
        entry = self._entries.get(name)
        if entry is None:
            known = ", ".join(sorted(self._entries)) or "none"
            raise ValueError(f"There is no skill named {name!r}; the skills are: {known}.")
        if entry.body is None:
            raise ValueError(
                f"The instructions of skill {name!r} are not loaded (the agent was rebuilt from "
                "a recorded run); load the skills directory again with .skills(...)."
            )
        return entry.body

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Skill]:
        return iter(self.skills)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __repr__(self) -> str:
        return f"SkillSet({', '.join(sorted(self._entries)) or 'empty'})"


SKILL_INDEX_PREAMBLE = (
    "The following skills provide specialized instructions for specific tasks. When a task "
    f"matches a skill's description, call the {READ_SKILL_TOOL} tool with the skill's name to "
    "read its full instructions before you go on."
)


def skill_index(skills: Iterable[Skill]) -> str:
    """The `<available_skills>` block for the system prompt ("" when there are none)."""
    items = [
        "  <skill>\n"
        f"    <name>{escape(s.name)}</name>\n"
        f"    <description>{escape(s.description)}</description>\n"
        "  </skill>"
        for s in skills
    ]
    if not items:
        return ""
    return "\n".join(
        [SKILL_INDEX_PREAMBLE, "", "<available_skills>", *items, "</available_skills>"]
    )


def with_skill_index(system_prompt: str, skills: Iterable[Skill]) -> str:
    """The system prompt the LLM is sent: the user's, then the skill index."""
    index = skill_index(skills)
    if not index:
        return system_prompt
    return f"{system_prompt}\n\n{index}" if system_prompt else index
