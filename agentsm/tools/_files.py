"""The file tools of a workspace: confinement, reading, writing, editing, listing, searching.

Each tool is `(workspace, args) -> str`; what it refuses it raises as `Refused(kind, message)`,
which the workspace turns into the failed result the LLM reads (`ERROR: kind: message`).
Paths in messages are relative to the workspace root, the form the LLM can use again.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .workspace import Workspace, WorkspaceLimits

__all__ = [
    "Refused",
    "edit_file",
    "list_files",
    "read_file",
    "resolve",
    "search_files",
    "write_file",
]

NOT_DESCENDED = frozenset({".git", "node_modules", "__pycache__", ".venv"})
"""Directories `list_files(recursive=true)` and `search_files` do not go into."""

_SNIFF = 8192  # a NUL byte in the first 8 KiB marks a binary file, as git decides
_LINE = 200  # the most characters of one line an excerpt or a search result shows


class Refused(Exception):
    """A call the workspace will not carry out, and why (said to the LLM, not raised to you)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def resolve(ws: Workspace, path: str) -> tuple[Path, Path, str]:
    """The workspace root, the real path (links followed) of `path`, and its name relative to
    the root; refused when the path, as written or once its links are followed, leaves it."""
    root = ws.root()
    text = path.strip() or "."
    if "\0" in text:
        raise Refused("InvalidPath", "a path cannot contain a NUL character.")
    given = Path(text)
    candidate = given if given.is_absolute() else root / given
    lexical = Path(os.path.normpath(candidate))
    if not (_inside(lexical, root) or _inside(lexical, ws.path)):
        if given.is_absolute():
            raise Refused(
                "OutsideWorkspace",
                f"{path!r} is an absolute path outside the workspace; give a path relative "
                "to the workspace root, such as 'src/app.py'.",
            )
        raise Refused(
            "OutsideWorkspace",
            f"{path!r} leads out of the workspace through '..'; paths must stay inside the "
            "workspace root.",
        )
    real = Path(os.path.realpath(candidate))
    if not _inside(real, root):
        raise Refused(
            "OutsideWorkspace",
            f"{path!r} goes through a symbolic link that points outside the workspace; only "
            "files inside the workspace can be used.",
        )
    return root, real, real.relative_to(root).as_posix()


def _missing(shown: str) -> Refused:
    return Refused(
        "FileNotFound",
        f"{shown!r} does not exist in the workspace; list_files or search_files can find it.",
    )


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:_SNIFF]


def _text_of(real: Path, shown: str, limits: WorkspaceLimits, tool: str) -> tuple[str, int]:
    """The text of a file a tool opens whole, refused when it is not one, too big or binary."""
    if not real.exists():
        raise _missing(shown)
    if real.is_dir():
        raise Refused("IsADirectory", f"{shown!r} is a directory; list_files shows its contents.")
    if not real.is_file():  # a pipe or a device could block the call for ever
        raise Refused("NotAFile", f"{shown!r} is not a regular file (a pipe, socket or device).")
    size = real.stat().st_size
    if size > limits.file_bytes:
        raise Refused(
            "FileTooLarge",
            f"{shown!r} is {size:,} bytes, over the {limits.file_bytes:,}-byte limit of {tool}; "
            "use search_files, or shell with head, tail or grep, to look into it.",
        )
    data = real.read_bytes()
    try:
        if _is_binary(data):
            raise UnicodeError
        return data.decode("utf-8"), size
    except UnicodeError:
        raise Refused(
            "BinaryFile",
            f"{shown!r} is a binary file ({size:,} bytes), not UTF-8 text; {tool} works on "
            "text files only.",
        ) from None


def _numbered(lines: list[str], first: int, last: int) -> str:
    """Lines `first`..`last` (1-based, clipped to the file) as `  12 | text`."""
    rows = []
    for n in range(max(first, 1), min(last, len(lines)) + 1):
        line = lines[n - 1]
        cut = "…" if len(line) > _LINE else ""
        rows.append(f"{n:>6} | {line[:_LINE]}{cut}")
    return "\n".join(rows)


def read_file(ws: Workspace, args: dict[str, Any]) -> str:
    _, real, shown = resolve(ws, args["path"])
    limits = ws.limits
    text, size = _text_of(real, shown, limits, "read_file")
    if not text:
        return f"{shown!r} is empty (0 bytes)."
    lines = text.splitlines(keepends=True)
    offset, limit = args["offset"], args["limit"]
    if offset > len(lines):
        raise Refused(
            "InvalidArguments",
            f"offset {offset} is past the end of {shown!r}, which has {len(lines):,} lines.",
        )
    shown_lines: list[str] = []
    used = 0
    end = min(len(lines), offset - 1 + limit)
    n = offset - 1  # lines[n] is the next line not shown
    long_line = ""
    while n < end:
        data = lines[n].encode()
        if used + len(data) > limits.read_bytes:
            if not shown_lines:  # one line longer than the limit: its start only
                shown_lines.append(data[: limits.read_bytes].decode("utf-8", errors="ignore"))
                long_line = (
                    f"; line {n + 1:,} is {len(data):,} bytes and only its first "
                    f"{limits.read_bytes:,} are shown (shell with cut or head -c shows the rest)"
                )
                n += 1
            break
        shown_lines.append(lines[n])
        used += len(data)
        n += 1
    body = "".join(shown_lines)
    if offset == 1 and n == len(lines) and not long_line:
        return body
    more = f"; read on with offset={n + 1}" if n < len(lines) else "; that is the end of the file"
    return (
        f"{body}{'' if body.endswith(chr(10)) else chr(10)}"
        f"[lines {offset:,}-{n:,} of {len(lines):,} shown: the file is {size:,} bytes and "
        f"read_file returns at most {limit:,} lines and {limits.read_bytes:,} bytes at once"
        f"{long_line}{more}]"
    )


def write_file(ws: Workspace, args: dict[str, Any]) -> str:
    _, real, shown = resolve(ws, args["path"])
    try:
        data = args["content"].encode("utf-8")
    except UnicodeEncodeError as e:
        raise Refused("InvalidArguments", f"content is not valid Unicode text: {e}.") from None
    if real.is_dir():
        raise Refused("IsADirectory", f"{shown!r} is a directory; give the path of a file.")
    before = real.stat().st_size if real.exists() else None
    if before is not None and not real.is_file():
        raise Refused("NotAFile", f"{shown!r} is not a regular file (a pipe, socket or device).")
    real.parent.mkdir(parents=True, exist_ok=True)
    real.write_bytes(data)
    was = "a new file" if before is None else f"replacing {before:,} bytes"
    return f"wrote {len(data):,} bytes to {shown!r} ({was})."


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _ambiguous(text: str, old: str, shown: str, count: int) -> str:
    starts: list[int] = []
    at = text.find(old)
    while at != -1 and len(starts) < 10:
        starts.append(at)
        at = text.find(old, at + len(old))
    numbers = [_line_of(text, s) for s in starts]
    where = ", ".join(map(str, numbers)) + (", ..." if count > len(numbers) else "")
    lines = text.splitlines()
    excerpts = "\n...\n".join(_numbered(lines, n - 1, n + 1) for n in numbers[:3])
    return (
        f"old_text occurs {count} times in {shown!r} (at lines {where}); nothing was changed. "
        "Add neighbouring lines to old_text so that it matches one place only, or set "
        f"replace_all to true to replace every occurrence.\n{excerpts}"
    )


def _no_match(text: str, old: str, shown: str) -> str:
    lines = text.splitlines()
    message = f"old_text was not found in {shown!r} ({len(lines):,} lines); nothing was changed."
    if " ".join(old.split()) in " ".join(text.split()):
        message += (
            " It does occur if spaces, tabs and line breaks are ignored: copy it exactly as "
            "read_file shows it, indentation included."
        )
    elif "\r\n" in text and "\n" in old and "\r\n" not in old:
        message += " The file's lines end with \\r\\n; old_text must too."
    first = next((line.strip() for line in old.splitlines() if line.strip()), "")
    stripped = [line.strip() for line in lines]
    close = difflib.get_close_matches(first, stripped, n=1, cutoff=0.6) if first else []
    if close:
        n = stripped.index(close[0]) + 1
        message += (
            f" The line most like its first line is line {n}:\n{_numbered(lines, n - 2, n + 2)}"
        )
    else:
        message += " No line resembles its first line: read_file shows the file as it is now."
    return message


def edit_file(ws: Workspace, args: dict[str, Any]) -> str:
    _, real, shown = resolve(ws, args["path"])
    old, new, every = args["old_text"], args["new_text"], args["replace_all"]
    if not old:
        raise Refused(
            "InvalidArguments",
            "old_text is empty; give the exact text to replace (write_file writes whole files).",
        )
    if old == new:
        raise Refused("InvalidArguments", "old_text and new_text are the same; nothing to do.")
    text, _ = _text_of(real, shown, ws.limits, "edit_file")
    count = text.count(old)
    if count == 0:
        raise Refused("NoMatch", _no_match(text, old, shown))
    if count > 1 and not every:
        raise Refused("AmbiguousMatch", _ambiguous(text, old, shown, count))
    line = _line_of(text, text.index(old))
    data = text.replace(old, new, -1 if every else 1).encode("utf-8")
    real.write_bytes(data)
    if count == 1:
        return f"replaced 1 occurrence in {shown!r} at line {line}; it is now {len(data):,} bytes."
    return (
        f"replaced {count} occurrences in {shown!r} (the first at line {line}); it is now "
        f"{len(data):,} bytes."
    )


class _Full(Exception):
    pass


def list_files(ws: Workspace, args: dict[str, Any]) -> str:
    _, real, shown = resolve(ws, args["path"])
    if not real.exists():
        raise _missing(shown)
    if not real.is_dir():
        raise Refused(
            "NotADirectory",
            f"{shown!r} is a file ({real.stat().st_size:,} bytes); read_file reads it.",
        )
    limit, recursive = ws.limits.list_entries, args["recursive"]
    rows: list[str] = []

    def add(row: str) -> None:
        if len(rows) >= limit:
            raise _Full
        rows.append(row)

    def walk(folder: str, prefix: str) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as e:
            add(f"{prefix or './'} (cannot be listed: {e.strerror})")
            return
        for entry in entries:
            name = prefix + entry.name
            if entry.is_symlink():
                add(f"{name} -> {os.readlink(entry.path)}")
            elif entry.is_dir():
                if recursive and entry.name in NOT_DESCENDED:
                    add(f"{name}/ (not listed)")
                    continue
                add(f"{name}/")
                if recursive:
                    walk(entry.path, f"{name}/")
            else:
                add(f"{name} ({entry.stat(follow_symlinks=False).st_size:,} bytes)")

    try:
        walk(str(real), "")
    except _Full:
        rows.append(
            f"[stopped at {limit:,} entries: list a subdirectory, or use search_files, to see more]"
        )
    if not rows:
        return f"{shown!r} is an empty directory."
    return f"{shown}/\n" + "\n".join(rows)


def _files_under(real: Path) -> Iterator[Path]:
    if not real.is_dir():
        yield real
        return
    for folder, dirs, files in os.walk(real):  # links to folders are not followed
        dirs[:] = sorted(d for d in dirs if d not in NOT_DESCENDED)
        for name in sorted(files):
            yield Path(folder, name)


def search_files(ws: Workspace, args: dict[str, Any]) -> str:
    pattern, glob = args["pattern"], args["glob"]
    try:
        regex = re.compile(pattern, re.IGNORECASE if args["ignore_case"] else 0)
    except re.error as e:
        raise Refused(
            "InvalidPattern",
            f"{pattern!r} is not a valid Python regular expression ({e}); escape characters "
            "such as ( [ . * + ? with a backslash to match them as they are.",
        ) from None
    root, real, shown = resolve(ws, args["path"])
    if not real.exists():
        raise _missing(shown)
    limits = ws.limits
    found: list[str] = []
    used, searched, files_matched = 0, 0, 0
    skipped = {"binary": 0, "larger than the limit": 0}
    stop = ""
    for path in _files_under(real):
        rel = path.relative_to(root).as_posix()
        if glob and not (fnmatch(path.name, glob) or fnmatch(rel, glob)):
            continue
        if path.is_symlink() or not path.is_file():
            continue
        if path.stat().st_size > limits.file_bytes:
            skipped["larger than the limit"] += 1
            continue
        if searched >= limits.search_files:
            stop = f"{limits.search_files:,} files searched"
            break
        data = path.read_bytes()
        try:
            if _is_binary(data):
                raise UnicodeError
            text = data.decode("utf-8")
        except UnicodeError:
            skipped["binary"] += 1
            continue
        searched += 1
        hit = False
        for n, line in enumerate(text.splitlines(), 1):
            if not regex.search(line):
                continue
            row = f"{rel}:{n}: {line[:_LINE]}{'…' if len(line) > _LINE else ''}"
            if len(found) >= limits.search_matches:
                stop = f"{limits.search_matches:,} matches"
            elif used + len(row.encode()) + 1 > limits.output_bytes:
                stop = f"{limits.output_bytes:,} bytes of results"
            if stop:
                break
            found.append(row)
            used += len(row.encode()) + 1
            hit = True
        files_matched += hit
        if stop:
            break
    notes = "".join(f", {n:,} {why} skipped" for why, n in skipped.items() if n)
    summary = f"{searched:,} files searched under {shown!r}{notes}"
    if not found:
        return f"no line matches {pattern!r} ({summary})."
    lines = "s" if len(found) != 1 else ""
    files = "s" if files_matched != 1 else ""
    tail = f"\n[{len(found)} matching line{lines} in {files_matched} file{files}; {summary}]"
    if stop:
        tail += f"\n[stopped at the limit of {stop}: narrow the pattern, the path or the glob]"
    return "\n".join(found) + tail
