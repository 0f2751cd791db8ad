"""The `--help` text of every command: what it does, its examples and its exit codes (tests/test_cli_help.py
checks that each example uses options the command has). Kept apart so that cli.py holds only declarations."""

HELP: dict[str, str] = {
    "main": """A PTX toolchain: parse, format, inspect and optimize NVIDIA PTX, checked with ptxas and the SASS.

\b
Examples:
  ptxtool parse --check kernel.ptx       parses? legal for its .target/.version?
  ptxtool fmt --check *.ptx              exit 1 if a file is not in canonical layout
  ptxtool inspect k.ptx                  registers, spills, occupancy, SASS per kernel
  ptxtool sass k.ptx -k my_kernel        the SASS under each PTX line it came from
  ptxtool cfg k.ptx -k my_kernel -o g.svg   control-flow graph, loops marked
  ptxtool inspect --budget b.toml *.ptx  CI: exit 1 on budget violations (--sarif)
  ptxtool lint *.ptx                     rules with ids; `ptxtool lint --explain ID`
  ptxtool report k.ptx -o report.html    one HTML page: resources, PTX beside SASS, pressure, CFG
  ptxtool optimize k.ptx -o opt.ptx      cache-operator rewriting, verified in SASS
  ptxtool run a.ptx b.ptx --spec s.toml  GPU: same inputs, outputs compared bit for bit
  ptxtool bench a.ptx b.ptx --spec s.toml   GPU: median times and the ratio B/A
  ptxtool tune k.ptx --spec s.toml -o best.ptx   GPU: the variant really faster, or the input
  ptxtool doctor                         which ptxas/nvdisasm/driver ptxtool uses

Each command has --help with more; docs/ in the repository has the details.

Exit codes: 0 ok, 1 found something (e.g. a file would change), 2 bad input or usage,
3 a required tool (ptxas, GPU driver) missing, 4 internal error.
""",
    "parse": """Check that PTX files parse; print a one-line summary per file.

FILE may be `-` for stdin. Every syntax error in a file is reported as
`file:line:col: error: ...` with the offending line; the exit code is then 2.
With --json, stdout holds one JSON document: {"schema": ..., "files": [{"path", "module"}], "errors": [...]}.


\b
Examples:
  ptxtool parse kernel.ptx             one line each: PTX version, target, kernels, instructions
  ptxtool parse --check *.ptx          also exit 1 where a file uses what its .version/.target lacks
  ptxtool parse --json k.ptx | jq .    the syntax tree
Exit 0 ok; 1 --check found something; 2 a file cannot be read or parsed.
""",
    "fmt": """Print PTX in canonical layout: same tokens, same program, every comment kept.

\b
One file and no option: the result goes to stdout. `-` reads stdin.
-o OUT writes one file; --in-place rewrites files atomically;
--check exits 1 when a file would change (pre-commit); --diff shows the change.
The layout depends only on the program and its comments, never on the input's
whitespace, and formatting twice changes nothing.


\b
Examples:
  ptxtool fmt k.ptx > tidy.ptx         the formatted text on stdout
  ptxtool fmt -i *.ptx                 rewrite the files that change
  ptxtool fmt --check --diff *.ptx     CI: show what would change, exit 1 if anything would
Exit 0 ok; 1 --check found a file that would change; 2 bad input or usage.
""",
    "doctor": """Say which NVIDIA tools ptxtool found, where, their versions, what ptxas supports,
and whether a GPU driver answers.

Exit code 3 when a required tool (ptxas, nvdisasm) is missing or broken; nvcc and cuobjdump are optional.


\b
Examples:
  ptxtool doctor                       one line per tool, then the GPU driver
  PTXTOOL_PTXAS=/opt/ptxas ptxtool doctor   check an override (PTXTOOL_NVDISASM, _NVCC, _CUOBJDUMP too)
  ptxtool doctor --json                the same as JSON (schema ptxtool.doctor/1)
""",
    "run": """Run a kernel on the GPU; with two files, run both on identical inputs and compare every buffer
bit for bit.

\b
Each trial draws fresh random inputs; outputs are poisoned with the spec's byte (0x5A) before every launch,
and a guard zone after each buffer catches writes past its end. A is run twice per trial first: if it
differs from itself the kernel is nondeterministic, and the spec must give its outputs a tolerance.
A .cubin file is loaded as it is (give the kernel's exact name). `-` reads PTX from stdin.
Exit 0: identical (or within tolerance); 1: outputs differ, a fault, or an overrun; 2: bad input or spec;
3: no GPU driver.


\b
Examples:
  ptxtool run k.ptx --spec saxpy.toml               run; faults and overruns are exit 1
  ptxtool run k.ptx k.opt.ptx -s saxpy.toml -n 20   20 trials of A against B, bit for bit
""",
    "bench": """Time a kernel with CUDA events: the median of many launches, and the ratio B/A measured in the same run.

\b
Launches of A and B alternate, each on the next of several copies of the inputs (together larger than
the L2), so neither gets a warm cache the other did not. `noise` is A's odd launches against its even ones:
a ratio closer to 1 than that is not a difference.


\b
Examples:
  ptxtool bench k.ptx k.opt.ptx --spec saxpy.toml   median of each and the ratio B/A
  ptxtool bench k.ptx -s saxpy.toml --json          timings as JSON (quantiles, noise)
Exit 0 timed; 2 bad input or spec; 3 no GPU driver.
""",
    "inspect": """Per kernel: ptxas resources, occupancy, SASS statistics and PTX facts; budgets and baselines for CI.

\b
FILE is PTX (`-`: stdin), or CUDA C++ (.cu) compiled to PTX with nvcc when nvcc is available
(messages then name its .cu lines).
Exit 1 when a kernel breaks a --budget limit or regresses against --baseline (one message each),
or with --strict when a budget table matches no kernel (otherwise a warning);
2 when an input cannot be read, parsed or assembled; 3 when ptxas or nvdisasm is missing.
Defaults come from [tool.ptxtool.inspect] in the nearest pyproject.toml (arch, block-size, backend,
budget, baseline).
--pressure draws the estimated register-pressure curve per PTX line beside the registers
the SASS really keeps live there (nvdisasm), and names the registers live at the peak.


\b
Examples:
  ptxtool inspect k.ptx                             the table: registers, spills, occupancy, SASS
  ptxtool inspect --json *.ptx > report.json        schema ptxtool.inspect/1
  ptxtool inspect --budget budget.toml --sarif *.ptx   CI: violations as code-scanning alerts
  ptxtool inspect --pressure -k my_kernel k.ptx     where the registers go
""",
    "sass": """Print the SASS ptxas makes of FILE, each run of instructions under the PTX line it came from.

Functions come in the order the PTX defines them, C++ names demangled beside their symbols. The PTX is
assembled with -lineinfo and disassembled with nvdisasm -gp; --plain leaves the PTX out, --addresses shows
each instruction's offset, --source the CUDA/Triton source lines the PTX's .loc names (when the file is
readable here; a note says when it is not).


\b
Examples:
  ptxtool sass k.ptx -k my_kernel      one kernel's SASS under its PTX lines
  ptxtool sass --arch sm_90 --plain k.ptx   SASS only, for another target
  ptxtool sass --source --addresses k.cu   SASS under the .cu lines, with offsets
Exit 0 ok; 2 FILE cannot be read, parsed or assembled, or no such kernel; 3 ptxas or nvdisasm missing.
""",
    "cfg": """Draw a kernel's control-flow graph, loops marked, as graphviz dot text or SVG.

\b
No -o: dot text on stdout (--format svg: SVG). -o cfg.dot (or .gv) writes the text; -o cfg.svg
draws the SVG in Python (layered layout; graphviz is not needed).
Loops are nested boxes titled with their induction variables; back edges are dashed.


\b
Examples:
  ptxtool cfg k.ptx -k my_kernel | dot -Tpng > cfg.png
  ptxtool cfg k.ptx -k my_kernel -o cfg.svg
  ptxtool cfg k.ptx -k my_kernel --format svg > cfg.svg
Exit 0 ok; 2 FILE cannot be read or parsed, or no such kernel.
""",
    "report": """One self-contained HTML page about PTX files, to read in a browser or keep as a CI artifact.

\b
Per kernel: ptxas's resources and the occupancy (the numbers of `inspect --json`), the PTX with
each line's SASS folded under it (and the .loc source line when there is one), the estimated
register pressure beside the live registers in the SASS, the control-flow graph, and the lint
findings on their lines. --optimized OPT.ptx adds the two files side by side, the SASS changes
per kernel and optimize's verification record (when OPT.ptx is what optimize makes of FILE);
--tune RESULT.json adds the candidate table and the winner. No -o: the page goes to stdout.
Readable without JavaScript; kernels after the first are folded.


\b
Examples:
  ptxtool report k.ptx -o report.html
  ptxtool report k.ptx --optimized k.opt.ptx -o review.html
  ptxtool report k.ptx --tune tune.json -o tune.html
Exit 0 ok; 2 a file cannot be read, parsed or assembled (or bad JSON); 3 ptxas or nvdisasm missing.
""",
    "lint": """Find correctness and performance problems in PTX (and CUDA sources compiled to PTX with nvcc).

\b
Each finding is one line on stdout: `path:line:col: ID severity: message` (severity coloured on a terminal);
a summary goes to stderr. --statistics counts findings per rule instead; --output-format json, sarif or github
(GitHub Actions annotations) writes a machine format.
Silence a rule on one statement with `// ptxtool: ignore[ID]` on its line, in a whole file with
`// ptxtool: ignore-file[ID]`. Defaults come from [tool.ptxtool.lint] in the nearest pyproject.toml
(select, ignore, ptxas, require-nvcc, arch, and per-rule tables such as [tool.ptxtool.lint.PTX003]).
`--explain ID` documents a rule. Exit 0 clean, 1 findings (at least --fail-on's severity), 2 bad input,
3 a required tool missing.


\b
Examples:
  ptxtool lint *.ptx                   every rule; findings on stdout
  ptxtool lint --fail-on warning --sarif *.ptx > lint.sarif   CI: notes do not fail the build
  ptxtool lint --output-format github *.ptx   annotations on a pull request (GitHub Actions)
  ptxtool lint --select PTX005,PTX006 k.cu   two rules, on PTX that nvcc makes of k.cu
  ptxtool lint --explain PTX005        what a rule finds and how to fix it
""",
    "optimize": """Add cache operators where analysis proves them safe; keep each rewrite only once ptxas and the SASS
bear it out.

\b
Policies: read-only loads get .nc (pointer parameters may alias: declare them alias-free with --noalias
KERNEL, as __restrict__ does); streaming loads .L1::no_allocate (.L2::256B when wide and sequential);
write-once stores .cs; --l2-evict-first adds an evict_first L2 policy. Settings: [tool.ptxtool.optimize].
Verification, per rewrite: ptxas accepts the output, its SASS carries the promised modifiers, no access crossed
a barrier, fence or atomic, nothing else changed; a rewrite that fails is dropped and said why (--strict: the
file fails). The output is the input's text with the kept rewrites spliced in.
--passes registers: per kernel, launch bounds, register caps and rematerialized values judged by ptxas's
registers, spills and occupancy ("not timed"), or timed with --verify-gpu; changed bounds are reported loudly.
--passes warp-roles: a staged tile loop split into consumer and producer warps (--producer-warps, --stages); the
block grows and the report says so; a kernel it cannot prove safe is left alone with its reason (-v). Time it
with `ptxtool tune`, which keeps the input unless the split is faster.
Exit 0: verified and written (or printed); 1: verification failed (--strict, --verify-gpu), nothing written;
2: bad input; 3: no ptxas.

\b
Examples:
  ptxtool optimize k.ptx -o k.opt.ptx              verified rewrites; the reasons on stderr
  ptxtool optimize k.ptx --diff                    what would change, as a unified diff
  ptxtool optimize --noalias my_kernel -i k.ptx    .nc too, for a kernel whose pointers never alias
  ptxtool optimize k.ptx -o k.opt.ptx --verify-gpu saxpy.toml   also compare outputs on the GPU
""",
    "tune": """Choose, on the GPU, the variant of a kernel that is really faster than the input; never a slower
or a wrong one.

\b
Candidates: the input; each cache-operator policy of `optimize` that changes the code; the launch parameters
the spec's [tune] table marks (block, grid, named scalar arguments: lists or {from, to, step}). --space and
[tool.ptxtool.tune] narrow or widen the space. Each candidate's outputs must match the input's (bit for bit
when only the code changed); the survivors are timed interleaved with the input on inputs rotated beyond the
L2, and one replaces the input only when its ratio's confidence interval lies below 1. Results are cached per
PTX, spec, GPU and driver (--fresh measures again). docs/tune.md has the method and the space's keys.
Exit 0: done (the winner may be the input); 1: a code-only candidate gave other outputs than the input;
2: bad input, spec or space; 3: no GPU driver (--dry-run needs none) or no ptxas.

\b
Examples:
  ptxtool tune k.ptx --spec saxpy.toml --dry-run            the candidates and their ptxas numbers
  ptxtool tune k.ptx --spec saxpy.toml -o best.ptx          time them; write the winner's PTX
  ptxtool tune k.ptx -s copy.toml --objective neighbour     beside an L2-resident sum on another stream
  ptxtool tune k.ptx -s copy.toml --space grid.toml --budget-s 60 --gpus all --json
""",
}
