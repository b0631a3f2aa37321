"""Reading params: YAML text (a params file or a `--set` value) and dotted keys."""

from __future__ import annotations

from typing import Any

import yaml

from rmlib.config.errors import ConfigError, cut, short


def not_a_mapping(data: Any) -> str:
    """Why a params document is not a params file: it must map section names to sections."""
    if data is None or data == {}:  # a file of nothing (or comments) is a mistake, not defaults
        what = "it is empty"
    elif isinstance(data, list):
        what = "got a list"
    else:
        what = f"got {type(data).__name__} {data!r:.40}"
    return f"a params file maps sections (run, model, ...) to their settings; {what}"


# A params file is a few hundred values; a document expanding to more (a YAML "billion laughs":
# aliases of aliases, each a few bytes) is refused before anything reads it.
MAX_PARAMS_VALUES = 100_000
# ... and nests a few levels (sections, a list of datasets, their mappings)
MAX_PARAMS_DEPTH = 32
MERGE_TAG = "tag:yaml.org,2002:merge"


class ParamsYAMLError(yaml.YAMLError):
    """A params document refused by the reader: `line` (1-based) says where, `message` what."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(f"line {line}: {message}")
        self.message, self.line = message, line


class _ParamsLoader(yaml.SafeLoader):
    """PyYAML's safe loader without YAML 1.1's base-60 numbers: `4:1` (a ratio) stays the
    string '4:1' instead of becoming the int 241 (and `1:30.5` stays text, not 90.5); a key given
    twice in one mapping (a section, a setting) is refused naming both lines, where PyYAML keeps
    the last without a word. Keys merged in by `<<: *anchor` may be overridden, as YAML says."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        tag = super().resolve(kind, value, implicit)
        numeric = tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
        if kind is yaml.ScalarNode and implicit[0] and numeric and ":" in value:
            return "tag:yaml.org,2002:str"
        return tag

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        """Refuse a document nested deeper than MAX_PARAMS_DEPTH as soon as it is: before the
        parser's recursion (or its scanner's time) grows with the depth."""
        self._depth += 1
        try:
            if self._depth > MAX_PARAMS_DEPTH:
                raise ParamsYAMLError(
                    f"nested deeper than {MAX_PARAMS_DEPTH} levels (a params file has a few)",
                    self.peek_event().start_mark.line + 1,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:  # before flatten_mapping adds the merged keys
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == MERGE_TAG:
                continue
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: construct_mapping says so
                continue
            if first is not None:
                where = f"on line {line}" if first == line else f"on lines {first} and {line}"
                raise ParamsYAMLError(
                    f"key {short(key, 80)} is given twice in one mapping ({where}): keep one "
                    "(YAML readers keep the last without a word)",
                    line,
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _count(root: yaml.Node) -> int:
    """How many values the document expands to (an alias counts its whole value each time it
    is used), stopping past MAX_PARAMS_VALUES; a value that contains itself is refused."""
    sizes: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # iterative: depth is the parser's business, not this count's
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if done:
            active.discard(id(node))
            sizes[id(node)] = min(1 + sum(sizes[id(c)] for c in children), MAX_PARAMS_VALUES + 1)
            continue
        if id(node) in active:
            raise ParamsYAMLError(
                "a value contains itself (a recursive alias): write it out",
                node.start_mark.line + 1,
            )
        active.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in active:
                raise ParamsYAMLError(
                    "a value contains itself (a recursive alias): write it out",
                    child.start_mark.line + 1,
                )
            stack.append((child, False))
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def key_lines(root: yaml.Node | None) -> dict[str, int]:
    """The line of each dotted key of a params document (`run.seed`, `data.eval[0].path`), each
    node visited once: an aliased value keeps the lines of its anchor."""
    lines: dict[str, int] = {}
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, str]] = [(root, "")] if root is not None else []
    while stack:
        node, where = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != MERGE_TAG:
                    dotted = f"{where}.{key.value}" if where else str(key.value)
                    lines.setdefault(dotted, key.start_mark.line + 1)
                    stack.append((value, dotted))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                lines.setdefault(f"{where}[{i}]", item.start_mark.line + 1)
                stack.append((item, f"{where}[{i}]"))
    return lines


def load_yaml(text: str) -> tuple[Any, dict[str, int]]:
    """A params document read as YAML (safe; base-60 numbers stay text; no key given twice; at
    most MAX_PARAMS_VALUES values once aliases are expanded), with the line of each dotted key.
    Raises yaml.YAMLError (ParamsYAMLError for this reader's own refusals, with its line)."""
    loader = _ParamsLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        if _count(node) > MAX_PARAMS_VALUES:
            raise ParamsYAMLError(
                f"the document expands to more than {MAX_PARAMS_VALUES:,} values (aliases of "
                "aliases?): a params file holds a few hundred",
                node.start_mark.line + 1,
            )
        return _unshared(loader.construct_document(node)), key_lines(node)
    except RecursionError:
        raise ParamsYAMLError(
            "nested too deeply for a params file (a few levels are)", loader.line + 1
        ) from None
    finally:
        loader.dispose()


def _unshared(value: Any) -> Any:
    """`value` with every mapping and list copied where an alias repeats it: YAML's loader gives
    an alias the anchor's own object, so a change to one section (a `--set`, a default the
    config fills in) would change every section sharing it. copy.deepcopy keeps that sharing
    (its memo), hence this walk; a value that contains itself was refused before (`_count`)."""
    if isinstance(value, dict):
        return {k: _unshared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unshared(v) for v in value]
    return value


def read_yaml(text: str) -> Any:
    """A params file or a `--set` value, read as YAML (safe; base-60 numbers stay text; no key
    given twice; no alias bomb)."""
    return load_yaml(text)[0]


def yaml_error_line(e: yaml.YAMLError) -> tuple[int | None, str]:
    """Where a YAML error is (1-based line, None if unknown) and what it says, in one line."""
    if isinstance(e, ParamsYAMLError):
        return e.line, e.message
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    if isinstance(e, yaml.MarkedYAMLError):
        parts = [e.context, e.problem, e.note]
        text = " ".join(" ".join(p.split()) for p in parts if p)
    else:
        text = " ".join(str(e).split())
    return (mark.line + 1 if mark is not None else None), cut(text)


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    node = data
    for p in parents:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"cannot set '{key}': '{p}' is not a mapping")
    node[last] = value
