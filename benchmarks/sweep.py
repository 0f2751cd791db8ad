"""Every ptxtool command over every PTX (and CUDA, where the command takes it) file in the tree: exit codes, times,
tracebacks, and whether the PTX a command prints is still accepted by the wheel's ptxas.

    .venv/bin/python benchmarks/sweep.py                     # everything; a table of commands x outcomes on stdout
    .venv/bin/python benchmarks/sweep.py --json sweep.json   # also each (command, file) record
    .venv/bin/python benchmarks/sweep.py --only fmt --only parse samples/   # some commands, some files

Each file is swept in a worker process that runs the commands in-process (click's test runner, `--debug` so that a
bug shows its traceback), each under an alarm; a file that kills its worker is recorded, not lost. `--environment`
also runs a few commands in fresh processes as a user with no home and with PATH cut to .venv/bin:/usr/bin:/bin.
Outcomes: ok (the exit code the command may give), found (exit 1), input (exit 2), environment (3), BUG (4 or a
traceback), TIMEOUT, SLOW (over 30 s), REJECTED (printed PTX that ptxas rejects where it accepts the input),
UNSTABLE (fmt of fmt's output differs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOTS = ("samples", "tests/corpus", "tests/data", "benchmarks", "shared/corpus")  # shared/: beside the checkout
SLOW_S = 30.0
LIMIT_S = 120.0


@dataclass(frozen=True)
class Command:
    """One command line over one file: its arguments (FILE where the file goes), whether it takes .cu, whether
    stdout is PTX (assembled afterwards), and the exit codes that are its ordinary answers."""

    name: str
    args: tuple[str, ...]
    cuda: bool = False
    prints_ptx: bool = False
    writes: bool = False  # the command writes OUT (a temporary file) and its stdout is something else


COMMANDS = (
    Command("parse", ("parse", "FILE")),
    Command("parse --check", ("parse", "--check", "FILE")),
    Command("parse --json", ("parse", "--json", "FILE")),
    Command("fmt", ("fmt", "FILE"), prints_ptx=True),
    Command("lint", ("lint", "-j", "1", "FILE"), cuda=True),
    Command("lint --json", ("lint", "-j", "1", "--json", "FILE"), cuda=True),
    Command("inspect", ("inspect", "-j", "1", "FILE"), cuda=True),
    Command("inspect --json", ("inspect", "-j", "1", "--json", "FILE"), cuda=True),
    Command("inspect --pressure", ("inspect", "-j", "1", "--pressure", "FILE"), cuda=True),
    Command("sass", ("sass", "FILE"), cuda=True),
    Command("cfg", ("cfg", "FILE", "KERNEL")),
    Command("optimize", ("optimize", "FILE"), prints_ptx=True),
    Command("optimize cache-operators", ("optimize", "--passes", "cache-operators", "FILE"), prints_ptx=True),
    Command("optimize registers", ("optimize", "--passes", "registers", "FILE"), prints_ptx=True),
    Command("optimize warp-roles", ("optimize", "--passes", "warp-roles", "FILE"), prints_ptx=True),
    Command("optimize --json", ("optimize", "--json", "-o", "OUT", "FILE"), prints_ptx=True, writes=True),
    Command("report", ("report", "-o", "OUT.html", "FILE"), writes=True),
)
ORDINARY = {0, 1}  # 1: findings, a file fmt would change, verification that failed, a `--check` problem


@dataclass
class Record:
    """What one command did with one file."""

    command: str
    file: str
    exit: int | None
    seconds: float
    outcome: str
    detail: str = ""
    ptxas: str = ""  # ok / rejected / n/a (the input is rejected too) / "" (not PTX output)
    extra: dict = field(default_factory=dict)


# ---------------------------------------------------------------- files


def files(roots: list[str]) -> list[Path]:
    """Every .ptx and .cu under the roots (a root may be a file), sorted, each once."""
    found: dict[Path, None] = {}
    for root in roots:
        path = _shared(root) if root.startswith("shared/") else (ROOT / root).resolve()
        if path.is_file():
            found[path] = None
        elif path.is_dir():
            for p in sorted(path.rglob("*")):
                if p.suffix in (".ptx", ".cu") and p.is_file() and ".venv" not in p.parts:
                    found[p.resolve()] = None
    return list(found)


def _shared(root: str) -> Path:
    """`shared/...` in the checkout, or beside the main worktree (a `git worktree` checkout lies elsewhere)."""
    common = subprocess.run(["git", "rev-parse", "--git-common-dir"], cwd=ROOT, capture_output=True, text=True)
    bases = [ROOT, ROOT.parent] + ([(ROOT / common.stdout.strip()).resolve().parent.parent] * bool(common.stdout))
    return next((b / root for b in bases if (b / root).exists()), ROOT / root)


def shown(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return os.path.relpath(path, ROOT)


# ---------------------------------------------------------------- ptxas


def ptxas_path() -> str:
    from cuda.pathfinder import find_nvidia_binary_utility

    path = find_nvidia_binary_utility("ptxas")
    if not path:
        sys.exit("the wheel's ptxas is not installed: .venv/bin/pip install -e '.[test]'")
    return path


def assemble_arch(text: str) -> str | None:
    """The -arch to assemble with: the first `.target sm_XY`, raised to sm_75 (the oldest CUDA 13 takes)."""
    match = re.search(r"^\s*\.target\s+(sm_\w+)", text, re.M)
    if not match:
        return None
    number = re.fullmatch(r"sm_(\d+)[af]?", match.group(1))
    return "sm_75" if number and int(number.group(1)) < 75 else match.group(1)


_VERDICTS: dict[str, tuple[bool, str]] = {}


def accepted(ptxas: str, text: str, arch: str) -> tuple[bool, str]:
    """Whether ptxas assembles `text` for `arch` (relocatable, so that extern calls need no definition), and why not."""
    key = hashlib.sha256(f"{arch}\0{text}".encode()).hexdigest()
    if key not in _VERDICTS:
        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp, "k.ptx")
            source.write_text(text)
            done = subprocess.run(
                [ptxas, "-c", f"-arch={arch}", "-o", str(Path(tmp, "k.o")), str(source)],
                capture_output=True,
                text=True,
                timeout=LIMIT_S,
            )
        _VERDICTS[key] = (done.returncode == 0, (done.stderr or done.stdout).strip().splitlines()[:3].__str__())
    return _VERDICTS[key]


# ---------------------------------------------------------------- one file, in a worker


class Timeout(BaseException):
    """The alarm of one command: a BaseException, so that no `except Exception` inside ptxtool swallows it."""


def _alarm(signum, frame):
    raise Timeout


def _kernel_args(text: str) -> tuple[str, ...]:
    """`--kernel NAME` for cfg when the module has several functions (cfg draws one)."""
    from ptxtool.syntax import ParseError, parse

    try:
        module = parse(text)
    except (ParseError, RecursionError, ValueError):
        return ()
    names = [f.name for f in module.functions if f.body is not None]
    return ("--kernel", names[0]) if len(names) > 1 else ()


def _invoke(runner, main, argv: list[str]) -> tuple[int | None, str, str, str, float]:
    """exit code (None: timed out), stdout, stderr, traceback, seconds."""
    start = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, LIMIT_S)
    try:
        result = runner.invoke(main, argv, prog_name="ptxtool", catch_exceptions=True)
    except Timeout:
        return None, "", "", "", time.perf_counter() - start
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    seconds = time.perf_counter() - start
    trace = ""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        trace = "".join(traceback.format_exception(*result.exc_info))
    code = result.exit_code if not trace else 4
    return code, result.stdout, result.stderr, trace, seconds


def sweep_file(path: str, only: tuple[str, ...], ptxas: str) -> list[dict]:
    """Every command over one file, in this process."""
    from click.testing import CliRunner

    from ptxtool.cli import main

    signal.signal(signal.SIGALRM, _alarm)
    runner = CliRunner()
    source = Path(path)
    text = source.read_text(errors="replace")
    is_cuda = source.suffix == ".cu"
    arch = None if is_cuda else assemble_arch(text)
    input_ok = accepted(ptxas, text, arch)[0] if arch else False
    kernel = () if is_cuda else _kernel_args(text)
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp, "out"))
        for command in COMMANDS:
            if only and command.name not in only:
                continue
            if is_cuda and not command.cuda:
                continue
            argv = ["--debug"]
            for a in command.args:
                argv += {"FILE": [path], "OUT": [out], "OUT.html": [out + ".html"], "KERNEL": list(kernel)}.get(a, [a])
            Path(out).unlink(missing_ok=True)
            code, stdout, stderr, trace, seconds = _invoke(runner, main, argv)
            record = Record(command.name, shown(source), code, round(seconds, 2), "")
            record.outcome, record.detail = _judge(code, stderr, trace, seconds)
            printed = Path(out).read_text() if command.writes and command.prints_ptx and Path(out).exists() else stdout
            if command.prints_ptx and code in ORDINARY and arch and printed.strip():
                record.ptxas = _check_output(ptxas, printed, arch, input_ok, record)
            if command.name == "fmt" and code == 0:
                _check_idempotent(runner, main, printed, tmp, record)
            if command.name == "optimize --json" and code in ORDINARY and stdout:
                record.extra["problems"] = json.loads(stdout).get("problems", [])
            records.append(asdict(record))
    return records


def _judge(code: int | None, stderr: str, trace: str, seconds: float) -> tuple[str, str]:
    if code is None:
        return "TIMEOUT", f"over {LIMIT_S:.0f} s"
    if trace or code == 4:
        return "BUG", (trace or stderr).strip()[-1500:]
    lines = [line for line in stderr.splitlines() if line.strip()]
    first = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "")
    if seconds > SLOW_S:
        return "SLOW", f"{seconds:.1f} s"
    return {0: "ok", 1: "found", 2: "input", 3: "environment"}.get(code, f"exit {code}"), first[:300]


def _check_output(ptxas: str, printed: str, arch: str, input_ok: bool, record: Record) -> str:
    ok, why = accepted(ptxas, printed, arch)
    if ok:
        return "ok"
    if not input_ok:
        return "n/a"
    record.outcome, record.detail = "REJECTED", why
    return "rejected"


def _check_idempotent(runner, main, printed: str, tmp: str, record: Record) -> None:
    once = Path(tmp, "once.ptx")
    once.write_text(printed)
    code, twice, _, trace, _ = _invoke(runner, main, ["--debug", "fmt", str(once)])
    if trace or code != 0 or twice != printed:
        record.outcome, record.detail = (
            "UNSTABLE",
            f"fmt of fmt's output: exit {code}, {'same' if twice == printed else 'differs'}",
        )


def _worker(path: str, only: tuple[str, ...], ptxas: str) -> list[dict]:
    try:
        return sweep_file(path, only, ptxas)
    except BaseException as error:  # noqa: BLE001 - a file that breaks the sweep itself is one record
        return [asdict(Record("(worker)", shown(Path(path)), None, 0.0, "BUG", repr(error)))]


# ---------------------------------------------------------------- environment subset, in fresh processes


def environment_runs(paths: list[Path]) -> list[dict]:
    """A few commands as an ordinary user with no home, and with PATH cut to the venv and the system's basics."""
    venv = ROOT / ".venv" / "bin"
    as_user = []
    if os.geteuid() == 0 and shutil.which("setpriv"):
        as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    cut = f"{venv}:/usr/bin:/bin"
    settings = {
        "no HOME": {"PATH": cut},  # no HOME at all: the password database's (nobody: /nonexistent)
        "HOME=/nonexistent": {"PATH": cut, "HOME": "/nonexistent"},
    }
    chosen = [p for p in paths if p.suffix == ".ptx"][:: max(1, len(paths) // 12)][:12]
    chosen += [p for p in paths if p.suffix == ".cu"][:2]
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o777)
        for label, env in settings.items():
            for path in chosen:
                for args in (("parse", "--check"), ("lint",), ("inspect",), ("optimize",), ("fmt",), ("doctor",)):
                    if path.suffix == ".cu" and args[0] not in ("lint", "inspect"):
                        continue
                    argv = [str(venv / "ptxtool"), *args] + ([] if args[0] == "doctor" else [str(path)])
                    start = time.perf_counter()
                    try:
                        done = subprocess.run(
                            as_user + argv, env=env, cwd=tmp, capture_output=True, text=True, timeout=LIMIT_S
                        )
                        code, stderr = done.returncode, done.stderr
                    except subprocess.TimeoutExpired:
                        code, stderr = None, ""
                    seconds = time.perf_counter() - start
                    trace = stderr if "Traceback" in stderr or "internal error" in stderr else ""
                    outcome, detail = _judge(code, stderr, trace, seconds)
                    name = f"[{label}] {' '.join(args)}"
                    records.append(asdict(Record(name, shown(path), code, round(seconds, 2), outcome, detail)))
    return records


# ---------------------------------------------------------------- the table


def table(records: list[dict]) -> str:
    outcomes = ["ok", "found", "input", "environment", "BUG", "TIMEOUT", "SLOW", "REJECTED", "UNSTABLE"]
    counts: dict[str, Counter] = defaultdict(Counter)
    for r in records:
        counts[r["command"]][r["outcome"]] += 1
    extra = sorted({o for c in counts.values() for o in c} - set(outcomes))
    header = ["command", *outcomes, *extra, "max s"]
    rows = [header]
    for name in counts:
        slowest = max(r["seconds"] for r in records if r["command"] == name)
        rows.append([name, *(str(counts[name][o] or "") for o in outcomes + extra), f"{slowest:.1f}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def problems(records: list[dict]) -> Iterator[str]:
    for r in records:
        if r["outcome"] in ("BUG", "TIMEOUT", "SLOW", "REJECTED", "UNSTABLE", "environment") or (
            r["outcome"].startswith("exit")
        ):
            yield f"{r['outcome']}: {r['command']} {r['file']} (exit {r['exit']}, {r['seconds']} s): {r['detail']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="*", default=list(ROOTS), help="files or directories (default: the tree)")
    parser.add_argument("--only", action="append", default=[], help="only this command (repeatable)")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="files swept at once")
    parser.add_argument("--json", help="write every record here (JSON lines, as each file is done)")
    parser.add_argument("--resume", action="store_true", help="skip the files --json already holds")
    parser.add_argument("--environment", action="store_true", help="also the no-home / cut-PATH subset")
    args = parser.parse_args()
    ptxas = ptxas_path()
    os.environ.setdefault("PTXTOOL_CACHE_DIR", str(Path(tempfile.gettempdir(), "ptxtool-sweep-cache")))
    paths = files(args.roots)
    only = tuple(args.only)
    records: list[dict] = []
    log = Path(args.json) if args.json else None
    if log and args.resume and log.exists():
        records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        done_files = {r["file"] for r in records}
        paths = [p for p in paths if shown(p) not in done_files]
    elif log:
        log.write_text("")
    started = time.perf_counter()
    with ProcessPoolExecutor(args.jobs, multiprocessing.get_context("spawn"), max_tasks_per_child=1) as pool:
        futures = {pool.submit(_worker, str(p), only, ptxas): p for p in paths}
        for n, (future, path) in enumerate(futures.items(), 1):
            try:
                done = future.result()
            except Exception as error:  # noqa: BLE001 - a worker killed by the file (a crash, out of memory)
                done = [asdict(Record("(worker)", shown(path), None, 0.0, "BUG", repr(error)))]
            records += done
            if log:
                with log.open("a") as stream:
                    stream.writelines(json.dumps(r) + "\n" for r in done)
            print(f"[{n}/{len(paths)}] {shown(path)}: {Counter(r['outcome'] for r in done)}", file=sys.stderr)
    if not only or "doctor" in only:
        from click.testing import CliRunner

        from ptxtool.cli import main as cli

        code, _, stderr, trace, seconds = _invoke(CliRunner(), cli, ["--debug", "doctor"])
        records.append(asdict(Record("doctor", "-", code, round(seconds, 2), *_judge(code, stderr, trace, seconds))))
    if args.environment:
        extra = environment_runs(files(args.roots))
        records += extra
        if log:
            with log.open("a") as stream:
                stream.writelines(json.dumps(r) + "\n" for r in extra)
    print(f"{len(paths)} files, {len(records)} runs, {time.perf_counter() - started:.0f} s\n")
    print(table(records))
    for line in problems(records):
        print(line)


if __name__ == "__main__":
    main()
