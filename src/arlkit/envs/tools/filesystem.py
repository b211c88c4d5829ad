"""An in-memory file system with shell-like tools (BFCL's ``GorillaFileSystem`` names and state
layout: a tree of ``{"type": "directory", "contents": {...}}`` and ``{"type": "file", "content":
"..."}`` nodes under one top-level directory, where the session starts)."""

from __future__ import annotations

import copy
import difflib
from typing import Any, Literal

from arlkit.envs.tools.api_base import tool

__all__ = ["FileSystem"]

MAX_NODES = 5000
MAX_BYTES = 1_000_000
Node = dict[str, Any]


def _is_dir(node: Any) -> bool:
    return isinstance(node, dict) and node.get("type") == "directory"


def _is_file(node: Any) -> bool:
    return isinstance(node, dict) and node.get("type") == "file"


def _size(node: Node) -> tuple[int, int]:
    """(number of nodes, bytes of content) of a subtree."""
    if _is_file(node):
        return 1, len(str(node.get("content", "")).encode("utf-8"))
    nodes, size = 1, 0
    for child in node.get("contents", {}).values():
        n, b = _size(child)
        nodes, size = nodes + n, size + b
    return nodes, size


def _valid_name(name: str) -> str | None:
    if not name or name in (".", "..") or "/" in name or len(name) > 255:
        return f"invalid name {name!r}: use a plain name without '/'"
    return None


def _validate_tree(node: Any, where: str) -> None:
    if _is_file(node):
        if not isinstance(node.get("content", ""), str):
            raise ValueError(f"{where}: file content must be a string")
        return
    if not _is_dir(node) or not isinstance(node.get("contents", {}), dict):
        raise ValueError(f"{where}: expected a file or directory node")
    for name, child in node.get("contents", {}).items():
        _validate_tree(child, f"{where}/{name}")


class FileSystem:
    """A small file system; every tool works on names in the current directory."""

    api_name = "FileSystem"
    bfcl_names = ("GorillaFileSystem",)
    description = "An in-memory file system. Tools act on names in the current directory (no paths)."

    def __init__(self) -> None:
        self.root: dict[str, Node] = {"workspace": {"type": "directory", "contents": {}}}
        self.cwd: list[str] = ["workspace"]

    def load_state(self, config: dict[str, Any]) -> None:
        """Take ``{"root": {"<top>": <directory node>}}``; the session starts in ``<top>``."""
        root = config.get("root", self.root)
        if not isinstance(root, dict) or len(root) != 1:
            raise ValueError("FileSystem: 'root' must hold exactly one top-level directory")
        ((top, node),) = root.items()
        _validate_tree(node, top)
        if not _is_dir(node):
            raise ValueError("FileSystem: the top-level entry must be a directory")
        node.setdefault("contents", {})
        self.root = copy.deepcopy(root)
        self.cwd = [top]
        if config.get("cwd"):
            self.cwd = [str(p) for p in config["cwd"]]
            self._node(self.cwd)  # validates

    # -- helpers -------------------------------------------------------------------------------
    def _node(self, parts: list[str]) -> Node:
        node: Node = self.root[parts[0]]
        for part in parts[1:]:
            node = node["contents"][part]
        return node

    def _here(self) -> dict[str, Node]:
        contents: dict[str, Node] = self._node(self.cwd)["contents"]
        return contents

    def _path(self) -> str:
        return "/" + "/".join(self.cwd)

    def _file(self, name: str) -> tuple[str | None, str]:
        node = self._here().get(name)
        if node is None:
            return f"no such file: {name!r} in {self._path()}", ""
        if not _is_file(node):
            return f"{name!r} is a directory", ""
        return None, str(node.get("content", ""))

    def _room_for(self, node: Node) -> str | None:
        total_nodes, total_bytes = _size(self._node(self.cwd[:1]))
        add_nodes, add_bytes = _size(node)
        if total_nodes + add_nodes > MAX_NODES or total_bytes + add_bytes > MAX_BYTES:
            return "the file system is full"
        return None

    # -- tools ---------------------------------------------------------------------------------
    @tool
    def pwd(self) -> dict[str, Any]:
        """Show the current working directory."""
        return {"current_working_directory": self._path()}

    @tool
    def ls(self, a: bool = False) -> dict[str, Any]:
        """List the contents of the current directory.

        Args:
            a: also show hidden entries (names starting with '.').
        """
        names = [n for n in self._here() if a or not n.startswith(".")]
        return {"current_directory_content": names}

    @tool
    def cd(self, folder: str) -> dict[str, Any]:
        """Change the current directory to a folder inside it, or to the parent with '..'.

        Args:
            folder: name of a directory in the current directory, '..' for the parent, or a relative path like 'a/b'.
        """
        parts = list(self.cwd)
        for step in [p for p in folder.split("/") if p not in ("", ".")]:
            if step == "..":
                if len(parts) == 1:
                    return {"error": "cd: already at the top directory"}
                parts.pop()
            else:
                child = self._node(parts)["contents"].get(step)
                if not _is_dir(child):
                    return {"error": f"cd: no such directory: {folder!r}"}
                parts.append(step)
        self.cwd = parts
        return {"current_working_directory": self._path()}

    @tool
    def mkdir(self, dir_name: str) -> dict[str, Any]:
        """Create a new directory in the current directory.

        Args:
            dir_name: name of the new directory.
        """
        problem = _valid_name(dir_name) or (f"{dir_name!r} already exists" if dir_name in self._here() else None)
        problem = problem or self._room_for({"type": "directory", "contents": {}})
        if problem:
            return {"error": f"mkdir: {problem}"}
        self._here()[dir_name] = {"type": "directory", "contents": {}}
        return {"result": f"created directory {dir_name!r}"}

    @tool
    def touch(self, file_name: str) -> dict[str, Any]:
        """Create an empty file in the current directory (an existing file is left as it is).

        Args:
            file_name: name of the file.
        """
        existing = self._here().get(file_name)
        if _is_file(existing):
            return {"result": f"{file_name!r} already exists"}
        problem = _valid_name(file_name) or (f"{file_name!r} is a directory" if existing else None)
        problem = problem or self._room_for({"type": "file", "content": ""})
        if problem:
            return {"error": f"touch: {problem}"}
        self._here()[file_name] = {"type": "file", "content": ""}
        return {"result": f"created file {file_name!r}"}

    @tool
    def echo(self, content: str, file_name: str | None = None) -> dict[str, Any]:
        """Write text to a file in the current directory (replacing its content), or print it.

        Args:
            content: the text.
            file_name: file to write (created if missing); None prints the text instead.
        """
        if file_name is None:
            return {"terminal_output": content}
        existing = self._here().get(file_name)
        problem = _valid_name(file_name) or (f"{file_name!r} is a directory" if _is_dir(existing) else None)
        problem = problem or self._room_for({"type": "file", "content": content})
        if problem:
            return {"error": f"echo: {problem}"}
        self._here()[file_name] = {"type": "file", "content": content}
        return {"terminal_output": None}

    @tool
    def cat(self, file_name: str) -> dict[str, Any]:
        """Show the content of a file in the current directory.

        Args:
            file_name: name of the file.
        """
        problem, text = self._file(file_name)
        return {"error": f"cat: {problem}"} if problem else {"file_content": text}

    @tool
    def rm(self, file_name: str) -> dict[str, Any]:
        """Remove a file or a directory (with everything in it) from the current directory.

        Args:
            file_name: name of the file or directory.
        """
        if file_name not in self._here():
            return {"error": f"rm: no such file or directory: {file_name!r}"}
        del self._here()[file_name]
        return {"result": f"removed {file_name!r}"}

    @tool
    def rmdir(self, dir_name: str) -> dict[str, Any]:
        """Remove an empty directory from the current directory.

        Args:
            dir_name: name of the directory.
        """
        node = self._here().get(dir_name)
        if node is None or not _is_dir(node):
            return {"error": f"rmdir: no such directory: {dir_name!r}"}
        if node["contents"]:
            return {"error": f"rmdir: directory {dir_name!r} is not empty"}
        del self._here()[dir_name]
        return {"result": f"removed directory {dir_name!r}"}

    def _transfer(self, verb: str, source: str, destination: str, keep: bool) -> dict[str, Any]:
        here = self._here()
        if source not in here:
            return {"error": f"{verb}: no such file or directory: {source!r}"}
        target = here.get(destination)
        if target is not None and _is_dir(target):
            if destination == source:
                return {"error": f"{verb}: cannot {verb} {source!r} into itself"}
            if source in target["contents"]:
                return {"error": f"{verb}: {destination}/{source} already exists"}
            into, name = target["contents"], source
        else:
            problem = _valid_name(destination) or (f"{destination!r} already exists" if target is not None else None)
            if problem:
                return {"error": f"{verb}: {problem}"}
            into, name = here, destination
        node = copy.deepcopy(here[source]) if keep else here[source]
        if keep and (problem := self._room_for(node)):
            return {"error": f"{verb}: {problem}"}
        if not keep:
            del here[source]
        into[name] = node
        where = f"{destination}/{source}" if into is not here else destination
        return {"result": f"{'copied' if keep else 'moved'} {source!r} to {where!r}"}

    @tool
    def mv(self, source: str, destination: str) -> dict[str, Any]:
        """Move a file or directory into a directory of the current directory, or rename it.

        Args:
            source: name of the file or directory to move.
            destination: an existing directory to move it into, or the new name.
        """
        return self._transfer("mv", source, destination, keep=False)

    @tool
    def cp(self, source: str, destination: str) -> dict[str, Any]:
        """Copy a file or directory into a directory of the current directory, or to a new name.

        Args:
            source: name of the file or directory to copy.
            destination: an existing directory to copy it into, or the name of the copy.
        """
        return self._transfer("cp", source, destination, keep=True)

    @tool
    def grep(self, file_name: str, pattern: str) -> dict[str, Any]:
        """Show the lines of a file that contain a text (case-sensitive).

        Args:
            file_name: name of the file.
            pattern: the text to look for.
        """
        problem, text = self._file(file_name)
        if problem:
            return {"error": f"grep: {problem}"}
        return {"matching_lines": [line for line in text.split("\n") if pattern in line]}

    @tool
    def wc(self, file_name: str, mode: Literal["l", "w", "c"] = "l") -> dict[str, Any]:
        """Count the lines, words or characters of a file.

        Args:
            file_name: name of the file.
            mode: 'l' for lines, 'w' for words, 'c' for characters.
        """
        problem, text = self._file(file_name)
        if problem:
            return {"error": f"wc: {problem}"}
        count = {"l": len(text.split("\n")) if text else 0, "w": len(text.split()), "c": len(text)}[mode]
        return {"count": count, "type": {"l": "lines", "w": "words", "c": "characters"}[mode]}

    @tool
    def tail(self, file_name: str, lines: int = 10) -> dict[str, Any]:
        """Show the last lines of a file.

        Args:
            file_name: name of the file.
            lines: how many lines to show.
        """
        problem, text = self._file(file_name)
        if problem:
            return {"error": f"tail: {problem}"}
        if lines < 0:
            return {"error": "tail: lines must be >= 0"}
        rows = text.split("\n")
        return {"last_lines": "\n".join(rows[-lines:] if lines else [])}

    @tool
    def sort(self, file_name: str) -> dict[str, Any]:
        """Show the lines of a file sorted alphabetically (the file is not changed).

        Args:
            file_name: name of the file.
        """
        problem, text = self._file(file_name)
        return {"error": f"sort: {problem}"} if problem else {"sorted_content": "\n".join(sorted(text.split("\n")))}

    @tool
    def diff(self, file_name1: str, file_name2: str) -> dict[str, Any]:
        """Compare two files line by line: lines only in the first start with '- ', only in the second with '+ '.

        Args:
            file_name1: the first file.
            file_name2: the second file.
        """
        p1, a = self._file(file_name1)
        p2, b = self._file(file_name2)
        if p1 or p2:
            return {"error": f"diff: {p1 or p2}"}
        changed = [line for line in difflib.ndiff(a.split("\n"), b.split("\n")) if line[:2] in ("- ", "+ ")]
        return {"diff_lines": "\n".join(changed)}

    @tool
    def find(self, path: str = ".", name: str | None = None) -> dict[str, Any]:
        """Find files and directories whose name contains a text, searching a folder recursively.

        Args:
            path: folder to search, '.' for the current directory or a relative path.
            name: text the name must contain; None lists everything.
        """
        parts = list(self.cwd)
        for step in [p for p in path.split("/") if p not in ("", ".")]:
            child = self._node(parts)["contents"].get(step) if step != ".." else None
            if step == ".." and len(parts) > 1:
                parts.pop()
                continue
            if not _is_dir(child):
                return {"error": f"find: no such directory: {path!r}"}
            parts.append(step)
        matches: list[str] = []

        def walk(node: Node, prefix: str) -> None:
            for child_name, child in node["contents"].items():
                here = f"{prefix}/{child_name}"
                if name is None or name in child_name:
                    matches.append(here)
                if _is_dir(child):
                    walk(child, here)

        walk(self._node(parts), path.rstrip("/") or ".")
        return {"matches": matches}

    @tool
    def du(self, human_readable: bool = False) -> dict[str, Any]:
        """Disk usage of the current directory (bytes of file content, recursively).

        Args:
            human_readable: show the size as B, KB or MB instead of a byte count.
        """
        _, size = _size(self._node(self.cwd))
        if not human_readable:
            return {"disk_usage": f"{size} bytes"}
        for unit, factor in (("MB", 1 << 20), ("KB", 1 << 10)):
            if size >= factor:
                return {"disk_usage": f"{size / factor:.2f} {unit}"}
        return {"disk_usage": f"{size} B"}
