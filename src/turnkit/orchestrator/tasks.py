"""Teams, tasks and their results, and the checks a task graph must pass.

``Task.depends_on`` names other tasks by title. Before anything runs, a task
list is checked as a whole (:func:`check_task_graph`): duplicate titles,
unknown assignees, unknown dependencies and cycles are all reported in one
:class:`~turnkit.errors.TaskGraphError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from turnkit.agent import AgentConfig, RunResult
from turnkit.errors import TaskGraphError
from turnkit.providers.base import Usage

__all__ = [
    "Task",
    "TaskResult",
    "TaskStatus",
    "Team",
    "TeamResult",
    "assign_tasks",
    "check_task_graph",
]

TaskStatus = Literal["completed", "failed", "skipped"]


@dataclass(frozen=True, slots=True)
class Task:
    """A piece of work for one agent of a team.

    ``description`` is text only (TypeError otherwise). ``assignee`` names an
    agent of the team; None lets the orchestrator choose. ``depends_on``
    names the tasks (by title) whose outputs this one needs: it starts when
    they have all completed, and sees their outputs in its input.

    >>> Task("Draft", "Write the post.", assignee="writer", depends_on=["Outline"]).depends_on
    ('Outline',)
    """

    title: str
    description: str
    assignee: str | None = None
    depends_on: Sequence[str] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.title, str):
            raise TypeError(f"Task.title must be a string, got {type(self.title).__name__}")
        if not self.title.strip():
            raise ValueError("Task.title must not be empty")
        if not isinstance(self.description, str):
            raise TypeError(
                f"Task {self.title!r}: description must be text (str), "
                f"got {type(self.description).__name__}"
            )
        if self.assignee is not None and not isinstance(self.assignee, str):
            raise TypeError(f"Task {self.title!r}: assignee must be an agent name or None")
        depends_on = self.depends_on
        if isinstance(depends_on, str) or not isinstance(depends_on, (list, tuple)):
            raise TypeError(
                f"Task {self.title!r}: depends_on must be a list of task titles, got {depends_on!r}"
            )
        if not all(isinstance(title, str) for title in depends_on):
            raise TypeError(f"Task {self.title!r}: depends_on must hold task titles (str)")
        object.__setattr__(self, "depends_on", tuple(depends_on))

    def to_dict(self) -> dict[str, Any]:
        """The task as JSON data, the shape a coordinator writes."""
        return {
            "title": self.title,
            "description": self.description,
            "assignee": self.assignee,
            "depends_on": list(self.depends_on),
        }


@dataclass(frozen=True, slots=True)
class Team:
    """Agents that take tasks, and an optional coordinator that plans for them.

    Agent names must be unique: tasks are assigned by name. Without a
    coordinator, ``run_team`` plans with a default one on the orchestrator's
    default model.
    """

    agents: Sequence[AgentConfig]
    coordinator: AgentConfig | None = None

    def __post_init__(self) -> None:
        agents = self.agents
        if isinstance(agents, AgentConfig) or not isinstance(agents, (list, tuple)):
            raise TypeError("Team.agents must be a list of AgentConfig")
        if not agents:
            raise ValueError("a Team needs at least one agent")
        names: set[str] = set()
        for agent in agents:
            if not isinstance(agent, AgentConfig):
                raise TypeError(f"Team.agents must hold AgentConfig objects, got {agent!r}")
            if agent.name in names:
                raise ValueError(f"Team.agents: two agents are named {agent.name!r}")
            names.add(agent.name)
        if self.coordinator is not None and not isinstance(self.coordinator, AgentConfig):
            raise TypeError("Team.coordinator must be an AgentConfig or None")
        object.__setattr__(self, "agents", tuple(agents))

    @property
    def names(self) -> tuple[str, ...]:
        """The agents' names, in order."""
        return tuple(agent.name for agent in self.agents)

    def agent(self, name: str) -> AgentConfig:
        """The agent called ``name`` (KeyError if there is none)."""
        for agent in self.agents:
            if agent.name == name:
                return agent
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class TaskResult:
    """How one task ended.

    ``status`` is ``completed``, ``failed`` (its run failed, after retries,
    or was refused by the budget) or ``skipped`` (a dependency did not
    complete, or the budget ran out before it started; ``error`` says why).
    ``result`` is the last attempt's RunResult, None when it never ran.
    """

    title: str
    status: TaskStatus
    agent: str | None
    output: str = ""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    attempts: int = 0
    error: str | None = None
    result: RunResult | None = None


@dataclass(frozen=True, slots=True)
class TeamResult:
    """What a team run produced.

    ``tasks`` follow the order of the task list. ``output`` is the
    coordinator's synthesis for ``run_team`` ("" for ``run_tasks``, and when
    the synthesis did not run). ``usage`` and ``cost_usd`` total every model
    call, the coordinator's included. ``success`` is True when every task
    completed (and, for ``run_team``, the synthesis succeeded); ``error``
    tells what went wrong otherwise.
    """

    tasks: tuple[TaskResult, ...]
    output: str = ""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    success: bool = True
    error: str | None = None
    plan: tuple[Task, ...] = ()

    def task(self, title: str) -> TaskResult:
        """The result of the task titled ``title`` (KeyError if none)."""
        for result in self.tasks:
            if result.title == title:
                return result
        raise KeyError(title)


def check_task_graph(tasks: Sequence[Task], agent_names: Sequence[str]) -> None:
    """Raise TaskGraphError naming every problem of ``tasks``; None if they can run."""
    problems: list[str] = []
    titles: dict[str, int] = {}
    for task in tasks:
        titles[task.title] = titles.get(task.title, 0) + 1
    problems += [f"duplicate task title {t!r}" for t, count in titles.items() if count > 1]
    known = set(agent_names)
    for task in tasks:
        if task.assignee is not None and task.assignee not in known:
            choices = ", ".join(repr(name) for name in agent_names)
            problems.append(
                f"task {task.title!r} is assigned to unknown agent {task.assignee!r} "
                f"(the team has {choices})"
            )
        problems += [
            f"task {task.title!r} depends on unknown task {dep!r}"
            for dep in task.depends_on
            if dep not in titles
        ]
    if cycle := _find_cycle({t.title: t.depends_on for t in tasks}):
        problems.append("dependency cycle: " + " -> ".join(repr(title) for title in cycle))
    if problems:
        raise TaskGraphError(problems)


def _find_cycle(graph: Mapping[str, Sequence[str]]) -> list[str] | None:
    """One cycle of ``graph`` (title -> titles it depends on), closed, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in graph:
        if state.get(root):
            continue
        path: list[str] = []
        stack: list[tuple[str, int]] = [(root, 0)]
        while stack:
            node, index = stack.pop()
            if index == 0:
                state[node] = 1
                path.append(node)
            deps = [d for d in graph.get(node, ()) if d in graph]
            if index < len(deps):
                stack.append((node, index + 1))
                dep = deps[index]
                if state.get(dep) == 1:
                    return [*path[path.index(dep) :], dep]
                if not state.get(dep):
                    stack.append((dep, 0))
            else:
                state[node] = 2
                path.pop()
    return None


def assign_tasks(tasks: Sequence[Task], agent_names: Sequence[str]) -> dict[str, str]:
    """Each task's agent: its assignee, else the team's agents in turn (round robin).

    Unassigned tasks are dealt out in list order, starting with the first
    agent, so the same task list always gets the same assignment.
    """
    assigned: dict[str, str] = {}
    turn = 0
    for task in tasks:
        if task.assignee is not None:
            assigned[task.title] = task.assignee
        else:
            assigned[task.title] = agent_names[turn % len(agent_names)]
            turn += 1
    return assigned
