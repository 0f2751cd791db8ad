"""The pre-commit entry for hooks that take CUDA sources: `python -m ptxtool.lint.hook COMMAND [ARGS] FILE...`.

`.cu` files need nvcc to become PTX. When nvcc is missing they are left out with a notice (exit status untouched),
unless `--require-nvcc` is among ARGS or `[tool.ptxtool.lint] require-nvcc = true`; then it is an error (exit 3).
The rest run through `ptxtool COMMAND ARGS FILE...` as they are.
"""

from __future__ import annotations

import os
import sys

from ptxtool.errors import EXIT_ENVIRONMENT, EXIT_INPUT, EXIT_OK, PtxtoolError

CUDA_SUFFIXES = (".cu", ".cuh")
PTX_SUFFIXES = (".ptx", *CUDA_SUFFIXES)
_OWN_FLAG = "--require-nvcc"


def split(args: list[str]) -> tuple[list[str], list[str]]:
    """Options (and their values) first, then the file names pre-commit appended (those with a PTX/CUDA suffix)."""
    end = len(args)
    while end > 0 and args[end - 1].endswith(PTX_SUFFIXES):
        end -= 1
    return args[:end], args[end:]


def _nvcc_problem() -> str | None:
    from ptxtool.toolchain.discover import find_tool

    try:
        find_tool("nvcc")
    except PtxtoolError as problem:
        return str(problem)
    return None


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m ptxtool.lint.hook COMMAND [ARGS] FILE...", file=sys.stderr)
        return EXIT_INPUT
    command, options, files = args[0], *split(args[1:])
    require = _OWN_FLAG in options
    options = [o for o in options if o != _OWN_FLAG]
    if not require:
        from ptxtool.config import load

        try:
            require = bool(load("lint").get("require-nvcc", False))
        except PtxtoolError as error:
            print(f"error: {error}", file=sys.stderr)
            return error.exit_code
    cuda = [f for f in files if f.endswith(CUDA_SUFFIXES)]
    problem = _nvcc_problem() if cuda else None
    if problem:
        if require:
            print(f"error: {len(cuda)} CUDA source(s) need nvcc: {problem}", file=sys.stderr)
            return EXIT_ENVIRONMENT
        print(f"notice: {len(cuda)} CUDA source(s) not checked, nvcc is not available: {problem}", file=sys.stderr)
        files = [f for f in files if f not in cuda]
    if not files:
        return EXIT_OK
    os.execv(sys.executable, [sys.executable, "-m", "ptxtool", command, *options, *files])
    return EXIT_OK  # not reached: execv replaces this process


if __name__ == "__main__":
    sys.exit(main())
