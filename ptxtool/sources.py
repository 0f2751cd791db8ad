"""Reading and writing users' files: clear errors for anything that is not PTX text, atomic writes."""

from __future__ import annotations

import errno
import os
import stat
import sys

from ptxtool.errors import Diagnostic, EnvironmentProblem, InputError, Location, UsageError
from ptxtool.records import finish, record

TYPE_CHECKING = False  # not typing's: its import costs every run 4 ms
if TYPE_CHECKING:  # the parser is imported by parse_source: `ptxtool --help` and GPU-only commands skip it
    from collections.abc import Sequence

    from ptxtool.syntax import ast

STDIN = "-"
CUDA_SUFFIXES = (".cu", ".cuh")
BINARY_SUFFIXES = (".cubin",)
_BINARY_MAGIC = (b"\x7fELF", b"\x50\xed\x55\xba")  # ELF (cubin, object file), fatbin
MAX_BYTES = 512 << 20  # 16 times the largest PTX we have seen (1 M lines, 32 MB); its AST would take ~6 GB


class Source(metaclass=record):
    """An input file's name (`<stdin>` for `-`) and its text; a binary input (a .cubin) has its bytes instead."""

    path: str
    text: str
    data: bytes = b""

    @property
    def display(self) -> str:
        return "<stdin>" if self.path == STDIN else self.path

    @property
    def is_cuda(self) -> bool:
        """CUDA C++ (.cu/.cuh): the services that take it compile the file itself with nvcc."""
        return self.path.endswith(CUDA_SUFFIXES)


class Unreadable(metaclass=record):
    """An input that could not be read, and why: the services report it in input order beside the others."""

    path: str
    diagnostics: tuple[Diagnostic, ...]

    @property
    def display(self) -> str:
        return "<stdin>" if self.path == STDIN else self.path


finish((Source, Unreadable))


def read_inputs(paths: Sequence[str], *, cuda: bool = False, binary: bool = False) -> list[Source | Unreadable]:
    """Read every input once, in order; `cuda` admits .cu/.cuh text, `binary` .cubin bytes. Stdin (`-`) only once."""
    if list(paths).count(STDIN) > 1:
        raise UsageError("stdin (-) can be read only once")
    out: list[Source | Unreadable] = []
    for path in paths:
        try:
            if binary and path.endswith(BINARY_SUFFIXES):
                out.append(Source(path, "", _read_bytes(path)))
            elif cuda and path.endswith(CUDA_SUFFIXES):
                out.append(Source(path, _read_bytes(path).decode("utf-8", errors="replace")))
            else:
                out.append(read_source(path))
        except InputError as error:
            out.append(Unreadable(path, tuple(error.diagnostics)))
    return out


def _read_bytes(path: str) -> bytes:
    if not os.path.isfile(path):
        raise InputError.at(path, "no such file")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as error:
        raise InputError.at(path, f"cannot read: {error.strerror or error}") from None


def read_source(path: str) -> Source:
    """Read a PTX file (or stdin for `-`) as UTF-8 text, or raise InputError saying why it cannot be."""
    if path == STDIN:
        data = sys.stdin.buffer.read(MAX_BYTES + 1)
        name = "<stdin>"
    else:  # (os.path, not pathlib: `fmt` and `parse` never import pathlib)
        name = path
        if not os.path.exists(path):
            raise InputError.at(path, "no such file")
        if os.path.isdir(path):
            raise InputError.at(path, "is a directory, not a PTX file (give the .ptx files inside it)")
        if os.path.splitext(path)[1] in CUDA_SUFFIXES:
            raise InputError.at(path, "CUDA C++, not PTX: compile it with `nvcc -ptx` (inspect and lint compile .cu)")
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_BYTES + 1)  # bounded: /dev/zero or a runaway pipe must not eat the memory
        except OSError as error:
            raise InputError.at(path, f"cannot read: {error.strerror or error}") from None
    if len(data) > MAX_BYTES:
        raise InputError.at(name, f"larger than {MAX_BYTES >> 20} MiB: ptxtool reads PTX files up to that size")
    if not data or data.isspace():  # (strip() would copy the whole file to learn this)
        raise InputError.at(name, "empty file: there is no PTX in it")
    if data.startswith(_BINARY_MAGIC) or b"\0" in data[:64]:
        raise InputError.at(name, "binary file, not PTX text (a cubin or object file? give the .ptx it came from)")
    # bytes that are not UTF-8 (Latin-1 in a comment, which ptxas accepts) become lone surrogates and are written
    # back as the same bytes; elsewhere the lexer reports them, as it does a NUL, with their line and column
    text = data.decode("utf-8", "surrogateescape")
    if not text.isascii() and hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="surrogateescape")  # `fmt` to stdout gives such bytes back unchanged too
    return Source(path, text)


def parse_source(source: Source) -> ast.Module:
    """Parse a source, turning syntax errors into diagnostics with the source line for a caret."""
    from ptxtool.syntax import ParseError, parse

    try:
        return parse(source.text)
    except ParseError as error:
        raise InputError(
            [
                Diagnostic(Location(source.display, i.line, i.column, error.source_line(i.line)), i.message)
                for i in error.issues
            ]
        ) from None


def _umask() -> int:
    """The process's umask (reading it means setting it: put it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_STANDARD_STREAMS = {"/dev/stdout": 1, "/dev/fd/1": 1, "/proc/self/fd/1": 1, "/dev/stderr": 2, "/dev/fd/2": 2}


def _refuse_read_only(path: str, target: str) -> None:
    """Refuse to replace a file its owner made read-only: the rename would bypass the mode `open` honours. Root
    passes the kernel's check on any file, so for root a file with no write bit at all counts as read-only too."""
    mode = os.stat(target).st_mode
    if os.access(target, os.W_OK) and not (os.geteuid() == 0 and not mode & 0o222):
        return
    raise InputError.at(
        path,
        f"read-only file (mode {mode & 0o7777:04o}): not replaced (make it writable, e.g. `chmod u+w`, to let "
        "ptxtool rewrite it)",
    )


def _write_stream(path: str, text: str) -> None:
    """Write to a device, a FIFO or a standard stream where it is: such a file is never replaced by a rename."""
    stream = _STANDARD_STREAMS.get(path)
    try:
        if stream is not None:
            out = sys.stdout if stream == 1 else sys.stderr
            out.write(text)
            out.flush()
            return
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise EnvironmentProblem(f"{path}: cannot write: {error.strerror} (disk full)") from None
        raise InputError.at(path, f"cannot write: {error.strerror or error}") from None


_TEMP_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _make_temp(directory: str, prefix: str) -> tuple[int, str]:
    """`tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".tmp")` (a new 0600 file, never an existing one),
    without importing tempfile: it pulls shutil, random, bz2 and lzma into every `fmt -i` run."""
    for _ in range(100):
        name = os.path.join(directory, f"{prefix}{os.urandom(6).hex()}.tmp")
        try:
            return os.open(name, _TEMP_FLAGS, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", directory)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def write_atomic(path: str, text: str) -> None:
    """Write an output file: a regular file is replaced all at once (a crash leaves the old file or the new one, never
    half of one); a device (/dev/null), a FIFO or /dev/stdout is written where it is."""
    if path in _STANDARD_STREAMS:
        return _write_stream(path, text)
    target = os.path.realpath(path)  # through a symbolic link: rewrite the file it points to, keep the link
    try:
        info = os.stat(target)
    except OSError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        if stat.S_ISDIR(info.st_mode):
            raise InputError.at(path, "is a directory: give a file name to write")
        return _write_stream(path, text)
    if info is not None:
        _refuse_read_only(path, target)
    mode = info.st_mode & 0o7777 if info is not None else 0o666 & ~_umask()  # a new file: as `open` makes it
    directory, filename = os.path.split(target)
    try:
        fd, tmp = _make_temp(directory or ".", f".{filename}.")
    except OSError as error:  # no such directory, read-only, /proc: the user's output path, not a bug
        raise InputError.at(path, f"cannot write in {directory}: {error.strerror or error}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
            f.write(text)
        os.chmod(tmp, mode)  # mkstemp makes 0600
        os.replace(tmp, target)
    except OSError as error:
        _remove(tmp)
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise EnvironmentProblem(f"{path}: cannot write: {error.strerror} (disk full)") from None
        raise
    except BaseException:
        _remove(tmp)
        raise
