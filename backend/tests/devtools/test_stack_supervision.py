"""The stack's supervision (`make run`, the soak): the product's processes that exit are
started again with the same command line and environment, as compose and Kubernetes restart
them; a crash loop, or any other process exiting, stops the stack with the reason."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stormwatch.devtools.stack import CRASH_LOOP_RESTARTS, Stack

# Each start appends $MARK to the file; it exits with code 3 while the file has fewer than
# $CRASHES lines after its own, then stays up.
PROGRAM = """
import os, sys, time
path = sys.argv[1]
with open(path, "a") as f:
    f.write(os.environ["MARK"] + "\\n")
if len(open(path).read().split()) <= int(os.environ["CRASHES"]):
    sys.exit(3)
time.sleep(300)
"""


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    """A stack with no servers, short restart delays, and every process stopped after."""
    s = Stack(tmp_path, 0, False, None, False)
    s.env = {"PATH": "/usr/bin:/bin"}
    s.restart_delays_s = (0.05, 0.1)
    yield s
    s.stop()


def spawn(stack: Stack, name: str, tmp_path: Path, crashes: int) -> Path:
    starts = tmp_path / f"{name}.starts"
    stack._spawn(name, [sys.executable, "-c", PROGRAM, str(starts)],
                 {"PATH": "/usr/bin:/bin", "MARK": f"{name}-env", "CRASHES": str(crashes)})
    return starts


def supervise_until(stack: Stack, done: Callable[[], bool], timeout_s: float = 30,
                    stop_at_problem: bool = False) -> list[str]:
    """Supervises until done() (or, asked, the first problem); returns the problems seen."""
    problems: list[str] = []
    deadline = time.monotonic() + timeout_s
    while not done() and not (stop_at_problem and problems):
        assert time.monotonic() < deadline, f"not done; restarts {stack.restarts}"
        problem = stack.supervise()
        if problem:
            problems.append(problem)
        time.sleep(0.02)
    return problems


def first_problem(stack: Stack, timeout_s: float = 60) -> str:
    return supervise_until(stack, lambda: False, timeout_s, stop_at_problem=True)[0]


def test_a_worker_that_exits_is_started_again_with_its_command_and_environment(
        stack: Stack, tmp_path: Path) -> None:
    starts = spawn(stack, "worker", tmp_path, crashes=2)
    problems = supervise_until(stack, lambda: starts.exists()
                               and len(starts.read_text().split()) == 3)
    assert problems == []
    assert starts.read_text().split() == ["worker-env"] * 3
    assert [(name, code) for name, code, _ in stack.restarts] == [("worker", 3)] * 2
    (name, proc), = stack.procs
    assert name == "worker" and proc.poll() is None
    assert stack.supervise() is None


def test_a_crash_loop_stops_the_stack_with_the_reason(stack: Stack, tmp_path: Path) -> None:
    starts = spawn(stack, "beat", tmp_path, crashes=1000)
    problem = first_problem(stack)
    assert "beat exited with code 3" in problem and "crash loop" in problem
    assert len(stack.restarts) == CRASH_LOOP_RESTARTS
    assert len(starts.read_text().split()) == CRASH_LOOP_RESTARTS + 1
    assert stack.procs == [] and not stack._due


def test_any_other_process_that_exits_stops_the_stack(stack: Stack, tmp_path: Path) -> None:
    spawn(stack, "emulator", tmp_path, crashes=1)
    assert first_problem(stack).startswith("emulator exited with code 3")
    assert stack.restarts == []


def test_a_process_killed_on_purpose_is_not_restarted_behind_the_killer(
        stack: Stack, tmp_path: Path) -> None:
    starts = spawn(stack, "api", tmp_path, crashes=1)
    # Its exit seen and its restart pending: a kill now cancels that restart.
    supervise_until(stack, lambda: "api" in stack._due)
    args = stack.kill("api")
    assert args[:2] == [sys.executable, "-c"]
    assert stack.supervise() is None
    assert stack.procs == [] and not stack._due
    # A running one: SIGKILLed, gone from the processes, nothing pending.
    stack._spawn("api", args, stack.commands["api"][1])
    supervise_until(stack, lambda: len(starts.read_text().split()) == 2)
    (_, proc), = stack.procs
    stack.kill("api")
    assert proc.returncode == -9
    assert stack.supervise() is None and stack.procs == [] and not stack._due
