"""Kernel names: the Itanium demangler on the corpus's C++ kernels (and c++filt as a second opinion where it is
installed), and the one matcher every command uses."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from conftest import CORPUS, SAMPLES, ptx_files

from ptxtool.errors import InputError
from ptxtool.syntax.names import choose_function, demangle, display, find, matches, target_number

# (symbol, signature), as the C++ ABI reads them: builtins, pointers, cv-qualifiers, substitutions (S_, S0_),
# template arguments and parameters (T_), literals, nested names, anonymous namespaces, local entities
CASES = [
    ("_Z5hadd2iPK7__half2S1_PS_", "hadd2(int, __half2 const*, __half2 const*, __half2*)"),
    ("_Z13reduce_kernelIdLi128EEvPKT_PS0_i", "void reduce_kernel<double, 128>(double const*, double*, int)"),
    ("_Z8copy_vecI4int2Li2EEvmPKT_PS1_", "void copy_vec<int2, 2>(unsigned long, int2 const*, int2*)"),
    ("_Z8vec_copyIcLi3EEvPK3VecIT_XT0_EEPS2_i", "void vec_copy<char, 3>(Vec<char, 3> const*, Vec<char, 3>*, int)"),
    ("_ZN2ns5scaleIfEEvPT_i", "void ns::scale<float>(float*, int)"),
    ("_ZN12_GLOBAL__N_14stepEv", "(anonymous namespace)::step()"),
    ("_ZZ9histogramPKhPjiE5local", "histogram(unsigned char const*, unsigned int*, int)::local"),
    ("_Z3fooIJifEEvDpT_", "void foo<int, float>(int, float)"),
    ("_Z4flagILb1EEvv", "void flag<true>()"),
]


@pytest.mark.parametrize(("symbol", "signature"), CASES, ids=[c[0] for c in CASES])
def test_demangles_kernel_names(symbol, signature):
    assert demangle(symbol).signature == signature


def test_plain_and_broken_names_are_left_alone():
    assert demangle("saxpy") is None and display("saxpy") == "saxpy"
    assert demangle("_Z5had") is None  # the name runs past the end
    assert demangle("_Z5hadd2iQ") is None  # an unknown type code
    assert demangle("_Z5hadd2i.constprop.0").signature == "hadd2(int)"


def _corpus_symbols() -> list[str]:
    found = set()
    for path in [*ptx_files(CORPUS), *ptx_files(SAMPLES)]:
        found |= set(re.findall(r"\b_Z[0-9A-Za-z_]+", path.read_text(errors="replace")))
    return sorted(s for s in found if not re.search(r"_param_\d+$", s))


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="no c++filt to compare with")
def test_agrees_with_cxxfilt_on_every_corpus_symbol():
    symbols = _corpus_symbols()
    assert len(symbols) > 100
    theirs = subprocess.run(["c++filt"], input="\n".join(symbols), capture_output=True, text=True).stdout.split("\n")
    read = 0
    for symbol, reference in zip(symbols, theirs, strict=False):
        mine = demangle(symbol)
        if mine is None:
            assert reference == symbol, f"{symbol}: c++filt reads {reference}"
            continue
        read += 1
        assert mine.signature == reference
    assert read >= 0.95 * len(symbols)


def test_one_matcher_for_every_spelling():
    symbol = "_Z13reduce_kernelIdLi128EEvPKT_PS0_i"
    for pattern in ("reduce_kernel", "reduce_*", "reduce_kernel<double, 128>", symbol, "_Z13reduce*"):
        assert matches(symbol, (pattern,)), pattern
    assert not matches(symbol, ("reduce",)) and not matches("saxpy", ("hadd2",))
    names = ["_Z13reduce_kernelIdLi128EEvPKT_PS0_i", "_Z13reduce_kernelIfLi256EEvPKT_PS0_i", "saxpy"]
    assert find(names, "reduce_kernel") == names[:2]  # a C++ name for two kernels: both, for the caller to refuse
    assert find(names, "reduce_kernel<float, 256>") == names[1:2]
    assert find(names, "saxpy") == ["saxpy"]


def test_choose_function_says_what_there_is():
    class F:
        def __init__(self, name: str) -> None:
            self.name = name

    functions = [F("_Z5hadd2iPK7__half2S1_PS_"), F("saxpy")]
    assert choose_function(functions, "hadd2", "k.ptx") is functions[0]
    with pytest.raises(InputError, match="several functions: choose one with --kernel"):
        choose_function(functions, None, "k.ptx")
    with pytest.raises(InputError, match="no function named 'nope'"):
        choose_function(functions, "nope", "k.ptx")


def test_target_numbers():
    assert [target_number(t) for t in ("sm_90a", "sm_100f", "sm_75", "sm90", "compute_90")] == [90, 100, 75, None, None]
