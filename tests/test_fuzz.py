"""Fuzzing the front end with mutants of the corpus (fixed seed): token and line edits, random bytes, deep nesting,
long lines, unterminated comments and strings, opcodes split by blanks and comments, debug-section data. Every
command run on a mutant ends with exit 0, 1 or 2 and a message, never a traceback, within a time bound per input;
what fmt prints parses again and is a fixed point."""

from __future__ import annotations

import random
import re
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import CORPUS, ptx_files

from ptxtool.cli import main

SEED = 20261201
MUTANTS = 156  # 12 of each mutation
SECONDS_PER_INPUT = 10  # a mutant of a few hundred lines parses in well under a second; a hang never ends
COMMANDS = (("parse", "--check"), ("fmt",))
TOKEN = re.compile(r"\s+|[A-Za-z_$%.][\w$.:]*|\d\w*|\S")


class _Hang(BaseException):
    """Raised from the alarm: BaseException, so that the CLI's guard does not turn it into exit 4."""


def _alarm(signum, frame) -> None:
    raise _Hang


def _sources() -> list[tuple[str, str]]:
    files = [p for p in ptx_files(CORPUS) if p.stat().st_size < 40_000]
    return [(p.name, p.read_text(encoding="utf-8", errors="replace")) for p in files]


# ---------------------------------------------------------------- mutations: each takes the text and a generator


def _tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def delete_token(text: str, rng: random.Random) -> str:
    tokens = _tokens(text)
    del tokens[rng.randrange(len(tokens))]
    return "".join(tokens)


def duplicate_token(text: str, rng: random.Random) -> str:
    tokens = _tokens(text)
    k = rng.randrange(len(tokens))
    tokens.insert(k, tokens[k])
    return "".join(tokens)


def swap_tokens(text: str, rng: random.Random) -> str:
    tokens = _tokens(text)
    a, b = rng.randrange(len(tokens)), rng.randrange(len(tokens))
    tokens[a], tokens[b] = tokens[b], tokens[a]
    return "".join(tokens)


def replace_token(text: str, rng: random.Random) -> str:
    tokens = _tokens(text)
    tokens[rng.randrange(len(tokens))] = rng.choice(
        ["{", "}", "(", ")", "[", "]", ";", ",", ".reg", ".entry", "@", "!", "-", "0x", "1.5e", '"', "::", ".b8"]
    )
    return "".join(tokens)


def delete_line(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    del lines[rng.randrange(len(lines))]
    return "\n".join(lines)


def duplicate_line(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    k = rng.randrange(len(lines))
    lines.insert(k, lines[k])
    return "\n".join(lines)


def swap_lines(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[a], lines[b] = lines[b], lines[a]
    return "\n".join(lines)


def random_bytes(text: str, rng: random.Random) -> str:
    k = rng.randrange(len(text))
    junk = "".join(
        chr(rng.choice([rng.randrange(1, 32), rng.randrange(32, 127), rng.randrange(128, 256)])) for _ in range(8)
    )
    return text[:k] + junk + text[k:]


def deep_nesting(text: str, rng: random.Random) -> str:
    depth = rng.choice([300, 2_000, 20_000])
    opener, closer = rng.choice([("{", "}"), ("(", ")"), ("[", "]"), ("-", ""), ("{", "")])
    k = text.rfind("ret;")
    k = k if k >= 0 else rng.randrange(len(text))
    return text[:k] + opener * depth + "1" + closer * depth + text[k:]


def long_line(text: str, rng: random.Random) -> str:
    k = text.find("\n", rng.randrange(len(text)))
    k = k if k >= 0 else len(text)
    filler = rng.choice(["a" * 100_000, "1," * 20_000, "%r1" * 20_000, " " * 100_000])
    return text[:k] + filler + text[k:]


def unterminated(text: str, rng: random.Random) -> str:
    k = rng.randrange(len(text))
    return text[:k] + rng.choice(["/*", '"', "/* *", '"\\', "/*\n" * 50]) + text[k:]


def split_opcode(text: str, rng: random.Random) -> str:
    """Blanks or a comment between an opcode's words (`ld.global /* c */ .f32`: ptxas takes it), or a line break."""
    found = list(re.finditer(r"^\s*(?:@!?%\w+\s+)?[a-z]\w*(\.)", text, re.M))
    if not found:
        return text
    k = rng.choice(found).start(1)
    return text[:k] + rng.choice([" ", "\t/* c */ ", "/**/", "// c\n", " // c\n\t"]) + text[k:]


def data_body(text: str, rng: random.Random) -> str:
    """A debug section of data lines on the fast path's edge: offsets, differences, negative numbers, odd blanks,
    labels, and now and then something the fast path must leave to the parser (a comment, a hex number, junk)."""
    values = ["7", "-1", "- 2", "$L__a", "$L__a+4", "$L__a + -4", "$L__b-$L__a", "$L__b - $L__a", ".debug_loc+136"]
    values += ["0x10", "/* c */ 3", "1.5", "$L__a+", "--1", "%r1"]
    rows = ["$L__a:"]
    for _ in range(rng.randrange(1, 30)):
        word = rng.choice([".b8", ".b16", ".b32", ".b64"])
        picked = [rng.choice(values[:9] if rng.random() < 0.9 else values) for _ in range(rng.randrange(1, 5))]
        rows.append(word + rng.choice([" ", "\t", "  "]) + rng.choice([",", ", ", " ,\t"]).join(picked))
    rows.insert(rng.randrange(len(rows) + 1), "$L__b :")
    section = "\n.section .debug_info\n{\n" + rng.choice(["\n", "\n\n", " "]).join(rows) + "\n}\n"
    return text + section


MUTATIONS: tuple[Callable[[str, random.Random], str], ...] = (
    delete_token,
    duplicate_token,
    swap_tokens,
    replace_token,
    delete_line,
    duplicate_line,
    swap_lines,
    random_bytes,
    deep_nesting,
    long_line,
    unterminated,
    split_opcode,
    data_body,
)


def mutants() -> Iterator[tuple[str, str]]:
    rng = random.Random(SEED)
    sources = _sources()
    for n in range(MUTANTS):
        name, text = rng.choice(sources)
        mutation = MUTATIONS[n % len(MUTATIONS)]
        yield f"{name}:{mutation.__name__}:{n}", mutation(text, rng)


def _run(args: list[str]):
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, SECONDS_PER_INPUT)
    try:
        return CliRunner().invoke(main, args, catch_exceptions=False)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs POSIX timers for the time bound")
def test_mutants_never_crash_or_hang(tmp_path: Path) -> None:
    assert _sources(), f"no corpus under {CORPUS}"
    failures: list[str] = []
    for label, text in mutants():
        path = tmp_path / "mutant.ptx"
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        for command in COMMANDS:
            try:
                result = _run([*command, str(path)])
            except _Hang:
                failures.append(f"{label}: {' '.join(command)} took more than {SECONDS_PER_INPUT} s")
                continue
            if result.exit_code not in (0, 1, 2) or "internal error" in result.output or "Traceback" in result.output:
                failures.append(f"{label}: {' '.join(command)} exit {result.exit_code}: {result.output[-300:]}")
            elif command == ("fmt",) and result.exit_code == 0:
                out = tmp_path / "out.ptx"
                out.write_text(result.stdout)
                again = _run(["fmt", str(out)])
                if again.exit_code != 0 or again.stdout != result.stdout:
                    failures.append(f"{label}: fmt output does not format to itself (exit {again.exit_code})")
    assert not failures, "\n".join(failures[:20])
