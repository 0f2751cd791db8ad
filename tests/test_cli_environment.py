"""The CLI where users really run it: no home directory, a read-only cache, outputs onto devices, FIFOs and
/dev/stdout, read-only files. Each runs `python -m ptxtool.cli` in a subprocess, as a user would.

Unwritable directories as root: root passes every permission check, so these tests drop to the `nobody` user
(uid 65534) with `setpriv` when they run as root, and need no help when they do not."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import SAMPLES

ROOT = Path(__file__).resolve().parents[1]
PTX = SAMPLES / "reduce.sm80.ptx"
NOBODY = 65534
IS_ROOT = os.geteuid() == 0
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]  # root acting as an ordinary user


def ptxtool(*args: str, env: dict | None = None, user: bool = False, **kwargs) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh process; `user`: as an ordinary user (nobody, when this runs as root)."""
    prefix = AS_NOBODY if user and IS_ROOT else []
    variables = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", **(env or {})}
    return subprocess.run(
        [*prefix, sys.executable, "-m", "ptxtool.cli", *args],
        env=variables,
        cwd=kwargs.pop("cwd", ROOT),
        capture_output=True,
        text=True,
        timeout=300,
        **kwargs,
    )


def _why_no_ordinary_user() -> str | None:
    """Why the tests cannot act as an ordinary user here (None: they can): as root they need setpriv, and `nobody`
    must be able to run this interpreter and import ptxtool (a checkout under a 0700 directory is out of its reach)."""
    if not IS_ROOT:
        return None
    if not shutil.which("setpriv"):
        return "running as root without setpriv: cannot act as an ordinary user"
    probe = "from ptxtool.config import find_pyproject; find_pyproject()"  # imports ptxtool, reads the checkout
    command = [*AS_NOBODY, sys.executable, "-c", probe]
    check = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    why = check.stderr.strip().splitlines()[-1:] or [f"exit {check.returncode}"]
    return None if check.returncode == 0 else f"the user nobody cannot use this checkout ({ROOT}): {why[0]}"


@pytest.fixture(scope="session")
def ordinary_user() -> None:
    if why := _why_no_ordinary_user():
        pytest.skip(why)


@pytest.fixture
def shared(ordinary_user: None) -> Iterator[Path]:
    """A directory the unprivileged user can read and write (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="ptxtool-env-"))
    path.chmod(0o777)
    shutil.copy(PTX, path / "k.ptx")
    (path / "k.ptx").chmod(0o644)
    yield path
    for directory in (p for p in path.rglob("*") if p.is_dir()):
        directory.chmod(0o755)
    shutil.rmtree(path)


COMMANDS = [
    ["inspect", "{k}"],
    ["sass", "{k}", "-k", "block_sum", "--plain"],
    ["lint", "--select", "PTX008", "{k}"],
    ["optimize", "{k}"],
]
IDS = ["inspect", "sass", "lint", "optimize"]
CACHE_WARNING = "warning: cache directory "


def _check_ran_without_cache(done: subprocess.CompletedProcess[str], directory: str) -> None:
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert done.stderr.count(CACHE_WARNING) == 1, done.stderr
    assert f"{CACHE_WARNING}{directory} unusable (" in done.stderr
    assert done.stdout.strip() or "0 findings in 1 file" in done.stderr  # lint: the summary; others: the result


@pytest.mark.parametrize("args", COMMANDS, ids=IDS)
def test_user_without_a_home_runs_without_the_cache(args, shared):
    """HOME=/nonexistent, as in containers and CI: one warning, the command's own result, exit 0."""
    assert not Path("/nonexistent").exists()
    done = ptxtool(*(a.format(k=shared / "k.ptx") for a in args), env={"HOME": "/nonexistent"}, user=True)
    _check_ran_without_cache(done, "/nonexistent/.cache/ptxtool")
    assert not Path("/nonexistent").exists()


@pytest.mark.skipif(not IS_ROOT, reason="needs to run as nobody, whose home in the password database is /nonexistent")
def test_user_without_home_variable_runs_without_the_cache(shared):
    """No HOME at all: the home from the password database (nobody's is /nonexistent) or none."""
    done = ptxtool("inspect", str(shared / "k.ptx"), user=True)
    assert done.returncode == 0 and done.stderr.count(CACHE_WARNING) == 1, done.stderr


@pytest.mark.parametrize("args", COMMANDS, ids=IDS)
def test_read_only_cache_directory_runs_without_it(args, shared):
    cache = shared / "cache"
    cache.mkdir()
    cache.chmod(0o555)
    env = {"HOME": str(shared), "PTXTOOL_CACHE_DIR": str(cache)}
    done = ptxtool(*(a.format(k=shared / "k.ptx") for a in args), env=env, user=True)
    _check_ran_without_cache(done, str(cache))
    assert not any(cache.iterdir())


@pytest.mark.parametrize("args", COMMANDS, ids=IDS)
def test_cache_directory_under_a_file_runs_without_it(args, tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    env = {"HOME": str(tmp_path), "PTXTOOL_CACHE_DIR": str(tmp_path / "notes.txt" / "cache")}
    done = ptxtool(*(a.format(k=PTX) for a in args), env=env)
    _check_ran_without_cache(done, str(tmp_path / "notes.txt" / "cache"))


def test_lint_in_parallel_warns_once(tmp_path):
    """Worker processes do not repeat the warning: the directory is checked once, before they start."""
    env = {"HOME": str(tmp_path), "PTXTOOL_CACHE_DIR": str(tmp_path / "notes.txt" / "cache")}
    (tmp_path / "notes.txt").write_text("x")
    done = ptxtool("lint", "-j", "2", "--select", "PTX008", str(PTX), str(SAMPLES / "pressure.sm80.ptx"), env=env)
    assert done.stderr.count(CACHE_WARNING) == 1, done.stderr


# ---------------------------------------------------------------- outputs that are not regular files


@pytest.fixture
def devices(tmp_path) -> Path:
    """Private copies of /dev/null and /dev/full (mknod needs root): a failing test must not replace the real ones."""
    if not IS_ROOT:
        pytest.skip("mknod of character devices needs root")
    os.mknod(tmp_path / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    os.mknod(tmp_path / "full", stat.S_IFCHR | 0o666, os.makedev(1, 7))
    return tmp_path


@pytest.mark.parametrize("command", [["fmt", str(PTX)], ["optimize", str(PTX)], ["cfg", str(PTX), "-k", "block_sum"]])
def test_output_onto_dev_null_keeps_the_device(command, devices):
    target = devices / "null" if command[0] != "cfg" else devices / "null.dot"
    if command[0] == "cfg":
        os.mknod(target, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    done = ptxtool(*command, "-o", str(target))
    assert done.returncode == 0, done.stderr
    assert stat.S_ISCHR(target.stat().st_mode) and not list(devices.glob(".*.tmp"))


@pytest.mark.parametrize("command", [["fmt", str(PTX)], ["optimize", str(PTX)]])
def test_output_onto_dev_full_is_disk_full(command, devices):
    done = ptxtool(*command, "-o", str(devices / "full"))
    assert done.returncode == 3, done.stderr
    assert f"error: {devices / 'full'}: cannot write: No space left on device (disk full)" in done.stderr
    assert stat.S_ISCHR((devices / "full").stat().st_mode)


def test_output_into_a_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = ptxtool("fmt", str(PTX), "-o", str(fifo))
    reader.join(60)
    if reader.is_alive():  # nothing was written into the FIFO: let the reader go
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert done.returncode == 0, done.stderr
    assert received and received[0].startswith(b"//") and stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.parametrize("command", [["fmt", str(PTX)], ["optimize", str(PTX)]])
def test_output_onto_dev_stdout(command):
    done = ptxtool(*command, "-o", "/dev/stdout")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("//") and ".entry block_sum" in done.stdout


# ---------------------------------------------------------------- read-only files


@pytest.mark.parametrize(
    "command",
    [["fmt", "-i", "{ro}"], ["fmt", str(PTX), "-o", "{ro}"], ["optimize", str(PTX), "-o", "{ro}"]],
    ids=["fmt-in-place", "fmt-output", "optimize-output"],
)
def test_read_only_file_is_not_replaced(command, tmp_path):
    """A file with no write permission is refused (exit 2), root included: the rename would bypass its mode."""
    ro = tmp_path / "ro.ptx"
    ro.write_text(PTX.read_text().replace("\n\n", "\n\n\n"))  # not canonical: fmt -i would rewrite it
    ro.chmod(0o444)
    before = ro.read_text()
    done = ptxtool(*(a.format(ro=ro) for a in command))
    assert done.returncode == 2, done.stderr
    assert f"{ro}: error: read-only file (mode 0444): not replaced" in done.stderr
    assert ro.read_text() == before and stat.S_IMODE(ro.stat().st_mode) == 0o444


def test_writable_file_is_still_replaced(tmp_path):
    out = tmp_path / "out.ptx"
    out.write_text("old")
    out.chmod(0o640)
    done = ptxtool("fmt", str(PTX), "-o", str(out))
    assert done.returncode == 0 and out.read_text().startswith("//") and stat.S_IMODE(out.stat().st_mode) == 0o640


@pytest.mark.parametrize("args", [["parse", str(PTX)], ["inspect", str(PTX)]], ids=["parse", "inspect"])
def test_a_missing_home_is_never_created(args: list[str], tmp_path: Path) -> None:
    """As whoever runs the tests (root too, who could create it): no cache under a home that does not exist, for
    the compile cache and the parser's table cache alike."""
    home = tmp_path / "missing" / "home"
    result = ptxtool(*args, env={"HOME": str(home)})
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "missing").exists()
