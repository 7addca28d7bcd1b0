"""What the coordinator of a team run is asked, and how its plan is checked.

The coordinator answers with a JSON array of tasks (``title``,
``description``, ``assignee`` among the team's agent names, ``depends_on``);
an object ``{"tasks": [...]}`` and a fenced code block are accepted too. The
plan is checked against a JSON schema and as a task graph; the problems
found are what the coordinator is told in its one corrective retry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from turnkit.agent import AgentConfig
from turnkit.errors import TaskGraphError
from turnkit.orchestrator.tasks import Task, TaskResult, Team, check_task_graph

__all__ = [
    "DEFAULT_COORDINATOR",
    "correction_prompt",
    "parse_plan",
    "plan_prompt",
    "plan_schema",
    "synthesis_prompt",
    "task_input",
]

DEFAULT_COORDINATOR = AgentConfig(
    "coordinator",
    system=(
        "You coordinate a team of AI agents. You split goals into clear, self-contained "
        "tasks for the team, and you write final answers from the team's results."
    ),
)

_FENCED = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def plan_schema(agent_names: Sequence[str]) -> dict[str, Any]:
    """The JSON schema a coordinator's plan must match."""
    return {
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "required": ["title", "description"],
            "properties": {
                "title": {"type": "string", "pattern": "\\S"},
                "description": {"type": "string", "pattern": "\\S"},
                "assignee": {"enum": [*agent_names, None]},
                "depends_on": {"type": "array", "items": {"type": "string"}},
            },
        },
    }


def plan_prompt(team: Team, goal: str) -> str:
    """The coordinator's planning request for ``goal``."""
    roster = "\n".join(f"- {agent.name}: {_describe_agent(agent)}" for agent in team.agents)
    names = ", ".join(json.dumps(name) for name in team.names)
    return (
        "Break the goal below into tasks for your team.\n\n"
        f"Team:\n{roster}\n\nGoal:\n{goal}\n\n"
        "Reply with only a JSON array of tasks. Each task is an object with:\n"
        '- "title": a short title, unique in the plan;\n'
        '- "description": what to do, complete enough to do it without the goal;\n'
        f'- "assignee": the agent who does it, one of {names};\n'
        '- "depends_on": the titles of the tasks whose results it needs ([] if none).\n'
        "Tasks without dependencies between them run in parallel."
    )


def correction_prompt(problems: Sequence[str]) -> str:
    """What the coordinator is told when its plan was unusable."""
    listed = "\n".join(f"- {problem}" for problem in problems)
    return (
        f"That plan cannot be used:\n{listed}\n\n"
        "Reply with the corrected plan: only the JSON array of tasks."
    )


def parse_plan(text: str, team: Team) -> tuple[list[Task], list[str]]:
    """The tasks in a coordinator's reply, or the problems that make it unusable."""
    try:
        data = json.loads(_json_text(text))
    except json.JSONDecodeError as err:
        return [], [f"the reply is not valid JSON ({err})"]
    if isinstance(data, Mapping) and "tasks" in data:
        data = data["tasks"]
    problems = _schema_problems(data, team.names)
    if problems:
        return [], problems
    tasks = [
        Task(
            item["title"],
            item["description"],
            item.get("assignee"),
            tuple(item.get("depends_on", ())),
        )
        for item in data
    ]
    try:
        check_task_graph(tasks, team.names)
    except TaskGraphError as err:
        return [], list(err.problems)
    return tasks, []


def _json_text(text: str) -> str:
    fenced = _FENCED.search(text)
    if fenced:
        return fenced.group(1).strip()
    text = text.strip()
    starts = [i for i in (text.find("["), text.find("{")) if i >= 0]
    if not starts:
        return text
    start = min(starts)
    end = max(text.rfind("]"), text.rfind("}"))
    return text[start : end + 1] if end > start else text[start:]


def _schema_problems(data: object, agent_names: Sequence[str]) -> list[str]:
    import jsonschema  # imported on first use: it is slow to import

    validator = jsonschema.Draft202012Validator(plan_schema(agent_names))
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{_path(error.absolute_path)}: {error.message}" for error in errors[:10]]


def _path(steps: Sequence[Any]) -> str:
    path = "tasks"
    for step in steps:
        path += f"[{step}]" if isinstance(step, int) else f".{step}"
    return path


def _describe_agent(agent: AgentConfig) -> str:
    lines = (agent.system or "").strip().splitlines()
    about = lines[0][:200] if lines else "(no description)"
    tools = [getattr(t, "name", getattr(t, "__name__", "?")) for t in agent.tools]
    return f"{about} (tools: {', '.join(tools)})" if tools else about


def task_input(task: Task, deps: Mapping[str, TaskResult], goal: str | None) -> str:
    """The text a task's agent is given: the task, and its dependencies' outputs."""
    parts = [f"Overall goal of the team:\n{goal}\n"] if goal is not None else []
    parts.append(f"Your task: {task.title}\n\n{task.description}")
    if deps:
        parts.append("\nResults of the tasks this one depends on:")
        parts += [f"\n### {title}\n{result.output}" for title, result in deps.items()]
    return "\n".join(parts)


def synthesis_prompt(goal: str, results: Sequence[TaskResult]) -> str:
    """The coordinator's request for the final answer, from the task results."""
    sections = []
    for result in results:
        if result.status == "completed":
            sections.append(f"### {result.title} (by {result.agent})\n{result.output}")
        else:
            sections.append(f"### {result.title} ({result.status}: {result.error})")
    body = "\n\n".join(sections)
    return (
        f"Goal:\n{goal}\n\nYour team's results:\n\n{body}\n\n"
        "Write the final answer to the goal from these results."
    )
