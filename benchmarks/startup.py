"""How fast the `agentsm` command answers: `agentsm --help`, `agentsm --version` and `agentsm
runs` on a small log, each against a bare `python -c pass`, in one run.

    python benchmarks/startup.py              # 30 rounds
    python benchmarks/startup.py -n 100 --check
    python benchmarks/startup.py --hyperfine  # the same commands timed by hyperfine

Every round runs each command once, in a new order each time, so that a busy machine slows
all of them alike; each figure is the median of the rounds, after three rounds of warm-up, in
wall time (what the limit is about) and in CPU time (user and system), the steadier of the two
on a busy machine. The log is made once by `agentsm demo` (two runs) in a temporary
directory; output goes to a pipe, as in a script; bytecode is cached (in that directory) as
for an installed package. `--check` exits 1 when a command takes more than `--limit` (2.5)
times as long as Python starting. `--hyperfine` hands the same commands to hyperfine (the
Debian package; optional) with as many runs, and reads its medians instead.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LIMIT = 2.5
"""How many times the time of `python -c pass` a command may take."""


def agentsm_command() -> list[str]:
    """The `agentsm` script installed beside this Python, as a user runs it."""
    script = Path(sys.executable).parent / "agentsm"
    return [str(script)] if script.exists() else [sys.executable, "-m", "replay"]


def commands(db: str) -> dict[str, list[str]]:
    agentsm = agentsm_command()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "agentsm --help": [*agentsm, "--help"],
        "agentsm --version": [*agentsm, "--version"],
        "agentsm runs": [*agentsm, "runs", "--db", db],
    }


def small_log(directory: str) -> str:
    """A log of two runs (the demo's run and its branch)."""
    db = os.path.join(directory, "small.db")
    subprocess.run([*agentsm_command(), "demo", "--db", db], check=True, capture_output=True)
    return db


def compiled_env(cache: str) -> dict[str, str]:
    """The environment with bytecode cached (in `cache`), as an installed package has it: a
    checkout run with PYTHONDONTWRITEBYTECODE would compile every module at every start."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {"PYTHONPYCACHEPREFIX": cache}


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """The wall time and the CPU time (user and system) of one run of `argv`."""
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - cpu.ru_utime) + (after.ru_stime - cpu.ru_stime)


def measure(
    cmds: dict[str, list[str]], rounds: int, env: dict[str, str], warmup: int = 3
) -> dict[str, tuple[float, float | None]]:
    """The median wall and CPU seconds of each command over `rounds` interleaved rounds."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
    order = list(cmds)
    for n in range(warmup + rounds):
        random.shuffle(order)
        for name in order:
            seconds = timed(cmds[name], env)
            if n >= warmup:
                times[name].append(seconds)
    return {
        name: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
        for name, values in times.items()
    }


def measure_with_hyperfine(
    cmds: dict[str, list[str]], rounds: int, env: dict[str, str]
) -> dict[str, tuple[float, float | None]]:
    """The medians hyperfine measures for the same commands (without a shell)."""
    hyperfine = shutil.which("hyperfine")
    if hyperfine is None:
        sys.exit("hyperfine is not installed (apt install hyperfine); run without --hyperfine.")
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "hyperfine.json")
        subprocess.run(
            [
                hyperfine,
                "--shell=none",
                "--warmup=3",
                f"--runs={rounds}",
                "--style=none",
                f"--export-json={report}",
                *(" ".join(argv) for argv in cmds.values()),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            env=env,
        )
        results = json.loads(Path(report).read_text())["results"]
    return {name: (r["median"], None) for name, r in zip(cmds, results, strict=True)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--rounds", type=int, default=30, help="rounds (default 30)")
    parser.add_argument("--limit", type=float, default=LIMIT, help="the ratio allowed (2.5)")
    parser.add_argument("--check", action="store_true", help="exit 1 when over the limit")
    parser.add_argument("--hyperfine", action="store_true", help="time with hyperfine")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cmds = commands(small_log(tmp))
        env = compiled_env(os.path.join(tmp, "pycache"))
        if args.hyperfine:
            medians = measure_with_hyperfine(cmds, args.rounds, env)
        else:
            medians = measure(cmds, args.rounds, env)
    base, base_cpu = medians["python -c pass"]
    how = "hyperfine" if args.hyperfine else "subprocess"
    print(f"agentsm startup, median of {args.rounds} rounds ({how}), {sys.version.split()[0]}")
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print()
    print("| command | wall | / python -c pass | CPU | / python -c pass |")
    print("|---|---:|---:|---:|---:|")
    over = []
    for name, (seconds, cpu) in medians.items():
        ratio = seconds / base
        cpu_cells = "| – | – |"  # hyperfine: wall time only
        if cpu is not None and base_cpu:
            cpu_cells = f"| {cpu * 1000:.0f} ms | {cpu / base_cpu:.2f}x |"
        print(f"| `{name}` | {seconds * 1000:.0f} ms | {ratio:.2f}x {cpu_cells}")
        if ratio > args.limit:
            over.append(name)
    print()
    print(f"limit {args.limit}x: " + (f"over it: {', '.join(over)}" if over else "all within"))
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
