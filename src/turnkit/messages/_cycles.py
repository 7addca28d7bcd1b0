"""Where a value that ran too deep holds itself: the path named in "a cycle".

Only asked once a freezing walk ran too deep, so it need not be fast.
"""

from __future__ import annotations

from turnkit.messages._json import FrozenDict, key_step

__all__ = ["cycle_steps"]


def _children(item: object) -> list[tuple[str, object]] | None:
    if issubclass(type(item), dict):
        return [(key_step(key), child) for key, child in dict.items(item)]
    if type(item) is FrozenDict:
        return [(key_step(key), child) for key, child in item.items()]
    if issubclass(type(item), list):
        return [(f"[{index}]", child) for index, child in enumerate(list.copy(item))]
    if issubclass(type(item), tuple):
        return [(f"[{index}]", child) for index, child in enumerate(tuple.__iter__(item))]
    return None


def cycle_steps(value: object, max_depth: int) -> str | None:
    """The path to where a container holds itself, if one does.

    Only asked once a walk ran too deep, so it need not be fast.
    """
    on_path: set[int] = set()

    def visit(item: object) -> list[str] | None:
        children = _children(item)
        if children is None:
            return None
        if id(item) in on_path:
            return []
        if len(on_path) > max_depth * 4:
            return None
        on_path.add(id(item))
        for step, child in children:
            found = visit(child)
            if found is not None:
                found.append(step)
                return found
        on_path.discard(id(item))
        return None

    found = visit(value)
    return None if found is None else "".join(reversed(found))
