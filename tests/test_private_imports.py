"""Private means private: no package of turnkit imports another's private modules
or names (ARCHITECTURE.md); what rooms share is imported from public modules,
such as ``turnkit.messages.checks``."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "turnkit"


def test_no_package_imports_another_packages_private_names() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).parts
        home = parts[0] if len(parts) > 1 else None
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            names = node.module.split(".")
            if names[0] != "turnkit" or len(names) < 3 or names[1] == home:
                continue  # not turnkit, turnkit's own top-level modules, or its own package
            private = [n for n in names[2:] if n.startswith("_")]
            private += [a.name for a in node.names if a.name.startswith("_")]
            if private:
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.module} {private}")
    assert found == []
