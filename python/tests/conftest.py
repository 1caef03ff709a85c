"""Shared fixtures: each test gets a context on a domain of its own, on
shared memory only (no network: tests never open a zenoh session that
could scout the LAN)."""

import itertools
import os
import pathlib
import signal
import subprocess
import sys

import pytest

import myelin

REPO = pathlib.Path(__file__).resolve().parents[2]

# Domains 120-149 are this suite's (the Rust suites use others).
_domains = itertools.count(120 + (os.getpid() % 3) * 10)


@pytest.fixture
def domain():
    return next(_domains) % 233


@pytest.fixture
def ctx(domain, monkeypatch):
    monkeypatch.setenv("MYELIN_TRANSPORT", "shm")
    monkeypatch.setenv("ROS_DOMAIN_ID", str(domain))
    c = myelin.Context()
    c.init(domain_id=domain, network=False)
    yield c
    c.try_shutdown()


@pytest.fixture
def node(ctx):
    n = myelin.create_node("pytest_node", context=ctx)
    yield n
    n.destroy_node()


def spin_until(node, cond, timeout=30.0, executor=None):
    """Spin ``node`` until ``cond()`` holds (fails after ``timeout`` s: a
    bound on a hang, never a speed expectation)."""
    import time

    ex = executor or myelin.SingleThreadedExecutor(context=node.context)
    added = ex.add_node(node)
    end = time.monotonic() + timeout
    try:
        while not cond():
            assert time.monotonic() < end, "gave up waiting"
            ex.spin_once(timeout_sec=0.1)
    finally:
        if added:
            ex.remove_node(node)


def _as_from_a_terminal():
    """Give the child the SIGINT of a program started from a terminal.

    A test run started in the background of a shell without job control
    (``bash -c 'bash .ci/run &'``) inherits SIGINT ignored, and Python keeps
    an ignored SIGINT ignored: Ctrl-C would never raise KeyboardInterrupt
    in the child, whatever myelin does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def python_child(code, domain, *args):
    """A Python child process running ``code`` on ``domain`` (shm only),
    with SIGINT as a terminal would start it (see ``_as_from_a_terminal``)."""
    env = dict(os.environ, MYELIN_TRANSPORT="shm", ROS_DOMAIN_ID=str(domain))
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_from_a_terminal,
    )


def rust_example(name):
    """The path of the Rust example ``name``, built if it is missing."""
    exe = REPO / "target" / "debug" / "examples" / name
    if not exe.exists():
        subprocess.run(
            ["cargo", "build", "-q", "-p", "myelin", "--example", name],
            cwd=REPO,
            check=True,
        )
    return exe


def myelin_cli():
    """The path of the `myelin` command, built if it is missing."""
    exe = REPO / "target" / "debug" / "myelin"
    if not exe.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "myelin-cli"], cwd=REPO, check=True)
    return exe
