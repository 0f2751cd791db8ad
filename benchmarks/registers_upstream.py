"""Real kernels from public projects, with the launch bounds their authors wrote, for benchmarks/registers.py.

Their code is not copied into this repository. `extract` writes each as a self-contained .cu from a clone of its
project at a pinned commit (`git show COMMIT:PATH`, so any clone holding the commit will do), by a mechanical recipe
that keeps the kernels' code, launch bounds and loops exactly as written:

- ccminer: the file with every project header it includes inlined where it is included (once, as written); each
  kernel named below is made `extern "C"` (a `static` before it dropped) so a launch spec can name it. Host code
  stays (nvcc -ptx compiles it; it is not in the PTX).
- llm.c: what the kernel needs from the same file (precision typedef, `MAX_1024_THREADS_BLOCKS`, warp and block
  reductions, `Packed128`), cut at the file's own markers, and the kernel, made `extern "C"`.

    python benchmarks/registers_upstream.py OUT --clone tpruvot/ccminer=PATH --clone karpathy/llm.c=PATH
    python benchmarks/registers.py prepare DIR --upstream OUT      # or PTXTOOL_UPSTREAM=OUT
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

CCMINER = ("tpruvot/ccminer", "6ff4e50987e59a70056324a94ed8667cc0bf598d", "GPL-3.0")
LLMC = ("karpathy/llm.c", "9b55ea8cf5b6ad5796b8b11f8c2d6fc4da2f6161", "MIT (Copyright (c) 2024 Andrej Karpathy)")


@dataclass(frozen=True, slots=True)
class Upstream:
    """One source file of a public project: where it is, the kernels it defines and the bounds their authors wrote."""

    name: str  # the .cu written: NAME.cu
    project: tuple[str, str, str]  # GitHub owner/name, commit, license
    path: str
    kernels: tuple[str, ...]  # made extern "C"
    bounds: str  # as written, for the header

    @property
    def repo(self) -> str:
        return self.project[0]

    @property
    def commit(self) -> str:
        return self.project[1]


UPSTREAM = (
    Upstream(
        "llmc_layernorm_bwd8",
        LLMC,
        "train_gpt2.cu",
        ("layernorm_backward_kernel8",),
        "__launch_bounds__(1024, MAX_1024_THREADS_BLOCKS) (2 on sm_80 and sm_90)",
    ),
    Upstream("ccminer_x11_echo", CCMINER, "x11/cuda_x11_echo.cu", ("x11_echo512_gpu_hash_64",), "(128, 7)"),
    Upstream(
        "ccminer_x11_shavite",
        CCMINER,
        "x11/cuda_x11_shavite512.cu",
        ("x11_shavite512_gpu_hash_64", "x11_shavite512_gpu_hash_80"),
        "(TPB, 7), TPB 128",
    ),
    Upstream(
        "ccminer_streebog", CCMINER, "x11/cuda_streebog_maxwell.cu", ("streebog_gpu_hash_64_sm5",), "(TPB, 3), TPB 256"
    ),
    Upstream(
        "ccminer_quark_skein",
        CCMINER,
        "quark/cuda_skein512.cu",
        ("quark_skein512_gpu_hash_64", "skein512_gpu_hash_80"),
        "(TPB52, 3) above sm_50, TPB52 512",
    ),
    Upstream(
        "ccminer_quark_bmw",
        CCMINER,
        "quark/cuda_bmw512.cu",
        ("quark_bmw512_gpu_hash_64", "quark_bmw512_gpu_hash_80"),
        "(32, 16) above sm_50 and (256, 2)",
    ),
    Upstream("ccminer_x16_echo80", CCMINER, "x16/cuda_x16_echo512.cu", ("x16_echo512_gpu_hash_80",), "(128, 7)"),
    Upstream("ccminer_x16_echo64", CCMINER, "x16/cuda_x16_echo512_64.cu", ("x16_echo512_gpu_hash_64",), "(128, 5)"),
    Upstream("ccminer_tribus_echo", CCMINER, "tribus/cuda_echo512_final.cu", ("tribus_echo512_gpu_final",), "(256, 3)"),
)

_INCLUDE = re.compile(r'\s*#\s*include\s*[<"]([^>"]+)[>"]')


@dataclass(frozen=True, slots=True)
class Clone:
    """A git clone holding a project's pinned commit; files are read from the commit, never the work tree."""

    path: Path
    commit: str

    def read(self, name: str) -> str | None:
        done = subprocess.run(["git", "-C", str(self.path), "show", f"{self.commit}:{name}"], capture_output=True)
        return done.stdout.decode("latin-1") if done.returncode == 0 else None  # byte for byte, any encoding


def _inline(clone: Clone, path: str, seen: set[str]) -> list[str]:
    """The file's lines with each project header it includes (found beside it, else at the root) inlined once."""
    lines = []
    for line in clone.read(path).splitlines():
        m = _INCLUDE.match(line)
        if m is None:
            lines.append(line)
            continue
        for candidate in (_normal(f"{PurePosixPath(path).parent}/{m.group(1)}"), _normal(m.group(1))):
            if candidate in seen:
                break  # inlined already
            if clone.read(candidate) is not None:
                seen.add(candidate)
                lines += [f"// ---- {candidate} (inlined)", *_inline(clone, candidate, seen), "// ---- end"]
                break
        else:
            lines.append(line)  # a system header
    return lines


def _normal(path: str) -> str:
    """`x16/../x11/a.cuh` -> `x11/a.cuh` (git paths have no `..`)."""
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            parts = parts[:-1]
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def _extern_c(text: str, kernel: str) -> str:
    """`__global__ [bounds] [static] void [bounds] K(` -> `extern "C" __global__ [bounds] void [bounds] K(`."""
    for at in re.finditer(r"\b" + kernel + r"\s*\(", text):
        start = text.rfind("__global__", 0, at.start())
        head = text[start : at.start()]
        if start >= 0 and ";" not in head and "}" not in head:
            head = re.sub(r"\bstatic\s+", "", head)
            return text[:start] + 'extern "C" ' + head + text[at.start() :]
    raise ValueError(f"kernel {kernel} not found")


def ccminer(clone: Clone, source: Upstream) -> str:
    text = "\n".join(_inline(clone, source.path, {source.path}))
    for kernel in source.kernels:
        text = _extern_c(text, kernel)
    return text


def _between(text: str, start: str, end: str) -> str:
    """From the line starting `start` through the line starting `end` (inclusive)."""
    i = text.index(start)
    j = text.index("\n", text.index(end, i))
    return text[i:j]


def _function(text: str, start: str) -> str:
    """From `start` through the closing brace at column 0."""
    i = text.index(start)
    return text[i : text.index("\n}\n", i) + 2]


def llmc(clone: Clone, source: Upstream) -> str:
    text = clone.read(source.path)
    bounds = "__global__ void __launch_bounds__(1024, MAX_1024_THREADS_BLOCKS)\n"
    kernel = _function(text, bounds + "                layernorm_backward_kernel8(")
    parts = [
        "#include <cuda_bf16.h>",
        "typedef __nv_bfloat16 floatX;  // train_gpt2.cu's default precision (bf16)",
        _between(text, "#if __CUDA_ARCH__ == 800 || __CUDA_ARCH__ >= 900", "#endif"),
        _between(text, "// warp-level reduction for summing values", "typedef Packed128<floatX> x128;"),
        kernel,
    ]
    return _extern_c("\n\n".join(parts), "layernorm_backward_kernel8")


RECIPES: dict[str, Callable[[Clone, Upstream], str]] = {"tpruvot/ccminer": ccminer, "karpathy/llm.c": llmc}


def header(source: Upstream) -> str:
    repo, commit, license_ = source.project
    return (
        f"// {', '.join(source.kernels)} of https://github.com/{repo} ({license_}), {source.path} at commit {commit},\n"
        f"// launch bounds as its authors wrote them: {source.bounds}. Extracted by benchmarks/registers_upstream.py\n"
        '// for benchmarks/registers.py (project headers inlined, kernels made extern "C"); not to be edited.\n'
    )


def extract(out: Path, clones: dict[str, Path]) -> list[str]:
    """Write OUT/NAME.cu for every source whose project has a clone; returns the names written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for source in UPSTREAM:
        if source.repo not in clones:
            continue
        clone = Clone(clones[source.repo], source.commit)
        if clone.read(source.path) is None:
            sys.exit(f"{clones[source.repo]} has no {source.commit}:{source.path}")
        (out / f"{source.name}.cu").write_text(header(source) + RECIPES[source.repo](clone, source), "latin-1")
        written.append(source.name)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--clone", action="append", default=[], help="OWNER/NAME=PATH of a git clone", metavar="R=P")
    args = parser.parse_args()
    clones = dict(c.split("=", 1) for c in args.clone)
    unknown = set(clones) - {s.repo for s in UPSTREAM}
    if unknown:
        sys.exit(f"no kernels of {', '.join(sorted(unknown))}")
    names = extract(args.out, {r: Path(p) for r, p in clones.items()})
    print(f"wrote {len(names)} sources to {args.out}: {', '.join(names)}")


if __name__ == "__main__":
    main()
