"""Every record class in the package is the class `@dataclass(frozen=True, slots=True)` makes of the same class body:
each module that makes records is executed a second time with `dataclasses` in place of `ptxtool.records`, and the
two classes are compared by everything dataclasses' functions, pickle, `match` and users see."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import importlib.util
import inspect
import os
import pickle
import pkgutil
import random
import subprocess
import sys
import types
from pathlib import Path

import pytest

import ptxtool
from ptxtool import records


def _modules() -> list[types.ModuleType]:
    """Every module of the package (all imported first: the twins below must find the real ones loaded)."""
    names = [m.name for m in pkgutil.walk_packages(ptxtool.__path__, "ptxtool.") if m.name != "ptxtool.__main__"]
    return [importlib.import_module(name) for name in names]


def _record_classes() -> list[type]:
    found = {}
    for module in _modules():
        for value in vars(module).values():
            if isinstance(value, type) and records.is_record(value) and value.__module__ == module.__name__:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[k] for k in sorted(found)]


RECORDS = _record_classes()
_TWINS: dict[str, types.ModuleType] = {}


def _twin(name: str) -> types.ModuleType:
    """Module `name` executed again, its `@record` classes made by `@dataclass(frozen=True, slots=True)`."""
    if name in _TWINS:
        return _TWINS[name]
    fake = types.ModuleType("ptxtool.records")
    frozen = dataclasses.dataclass(frozen=True, slots=True)
    # `@record` and `metaclass=record` alike: the dataclass of the class body
    fake.record = lambda cls, *made: frozen(type(cls, *made) if made else cls)
    fake.finish = lambda classes: None
    fake.field = dataclasses.field
    fake.replace = dataclasses.replace
    fake.is_record = dataclasses.is_dataclass
    fake.field_names = lambda cls: tuple(f.name for f in dataclasses.fields(cls))
    real = sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, real.__file__)
    twin = importlib.util.module_from_spec(spec)
    saved = sys.modules["ptxtool.records"]
    sys.modules["ptxtool.records"], sys.modules[name] = fake, twin  # dataclass looks the module up by name
    try:
        spec.loader.exec_module(twin)
    finally:
        sys.modules["ptxtool.records"], sys.modules[name] = saved, real
    _TWINS[name] = twin
    return twin


def _reference(cls: type) -> type:
    reference = vars(_twin(cls.__module__))[cls.__name__]
    assert dataclasses.is_dataclass(reference) and not records.is_record(reference)  # the premise: a real dataclass
    return reference


def _values(cls: type) -> dict[str, object]:
    rng = random.Random(cls.__qualname__)
    return {f.name: rng.choice(["a", 1, (), None, (1, "b")]) for f in dataclasses.fields(cls)}


def _error(call: object) -> tuple[type, str] | None:
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the error itself is what is compared
        return type(error), str(error)
    return None


def test_the_walk_finds_the_records() -> None:
    names = {f"{c.__module__}.{c.__qualname__}" for c in RECORDS}
    assert {"ptxtool.syntax.ast.Instruction", "ptxtool.errors.Diagnostic", "ptxtool.sources.Source"} <= names
    assert len(RECORDS) >= 45


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_a_record_is_the_frozen_slotted_dataclass_of_its_class_body(cls: type) -> None:
    reference = _reference(cls)
    assert dataclasses.is_dataclass(cls) and dataclasses.is_dataclass(cls.__new__(cls))
    attributes = ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare", "kw_only")
    mine, theirs = dataclasses.fields(cls), dataclasses.fields(reference)
    assert [[getattr(f, a) for a in attributes] for f in mine] == [[getattr(f, a) for a in attributes] for f in theirs]
    assert [(f.metadata, f._field_type) for f in mine] == [(f.metadata, f._field_type) for f in theirs]
    assert repr(cls.__dataclass_params__) == repr(reference.__dataclass_params__)
    assert cls.__match_args__ == reference.__match_args__ and cls.__slots__ == reference.__slots__
    assert str(inspect.signature(cls)) == str(inspect.signature(reference))
    assert cls.__init__.__annotations__ == reference.__init__.__annotations__
    assert cls.__doc__ == reference.__doc__ and cls.__qualname__ == reference.__qualname__
    assert set(dir(cls)) == set(dir(reference))

    values = _values(cls)
    node, twin = cls(**values), reference(**values)
    assert repr(node) == repr(twin) and hash(node) == hash(twin)
    assert node.__getstate__() == twin.__getstate__()
    assert not hasattr(node, "__dict__") and not hasattr(twin, "__dict__")
    assert node == cls(**values) and node != twin and (node == twin) == (twin == node) is False
    for f in mine:
        changed = dict(values, **{f.name: "changed"})
        assert (cls(**changed) == node) == (reference(**changed) == twin)  # compare=False fields take no part
        assert (hash(cls(**changed)) == hash(node)) == (hash(reference(**changed)) == hash(twin))
        assert dataclasses.replace(node, **{f.name: "changed"}) == cls(**changed)
        assert records.replace(node, **{f.name: "changed"}) == cls(**changed)
        assigned = _error(lambda n=f.name: setattr(node, n, 0))
        assert assigned is not None and assigned[0] is dataclasses.FrozenInstanceError
        assert assigned == _error(lambda n=f.name: setattr(twin, n, 0))
        assert _error(lambda n=f.name: delattr(node, n)) == _error(lambda n=f.name: delattr(twin, n))
    # another name: both refuse (3.11's slotted dataclass with a TypeError from `super()` of the class it replaced)
    assert _error(lambda: setattr(node, "other", 0))[0] is dataclasses.FrozenInstanceError
    assert _error(lambda: setattr(twin, "other", 0)) is not None
    assert dataclasses.asdict(node) == dataclasses.asdict(twin)
    assert dataclasses.astuple(node) == dataclasses.astuple(twin)
    assert records.field_names(cls) == tuple(f.name for f in theirs)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(node, protocol))
        assert back == node and type(back) is cls and repr(back) == repr(node)
    assert copy.copy(node) == node and copy.deepcopy(node) == node
    assert _matched(node, cls) == [values[name] for name in cls.__match_args__]


def _matched(node: object, cls: type) -> list[object] | None:
    """What `case cls(v0, v1, ...)` binds (class patterns read `__match_args__`), or None."""
    names = ", ".join(f"v{i}" for i in range(len(cls.__match_args__)))
    namespace: dict[str, object] = {}
    exec(f"def matched(node, C):\n    match node:\n        case C({names}):\n            return [{names}]\n", namespace)
    return namespace["matched"](node, cls)


def test_a_record_inside_itself_shows_as_dots_as_in_a_dataclass() -> None:
    from ptxtool.services.fmt import FmtResult, Options

    shown = []
    for result_class, options_class in ((FmtResult, Options), (_reference(FmtResult), _reference(Options))):
        result = result_class(options_class())
        result.files.append(result)  # a mutable field holding the record itself
        shown.append(repr(result))
    assert shown[0] == shown[1] and "files=[...]" in shown[0]


def _declare(body: dict[str, object], annotations: dict[str, str]) -> type:
    return type("Bad", (), {"__annotations__": annotations, "__module__": __name__, **body})


@pytest.mark.parametrize(
    ("annotations", "body"),
    [
        ({"a": "int", "b": "int"}, {"a": 0}),  # a field without a default after one with
        ({"a": "list"}, {"a": []}),  # a mutable default
        ({}, {"a": "field"}),  # a field() without an annotation
    ],
    ids=["order", "mutable", "unannotated"],
)
def test_a_record_refuses_what_dataclass_refuses(annotations: dict[str, str], body: dict[str, object]) -> None:
    theirs = dict(body, a=dataclasses.field()) if body.get("a") == "field" else body
    mine = dict(body, a=records.field()) if body.get("a") == "field" else body
    expected = _error(lambda: dataclasses.dataclass(frozen=True, slots=True)(_declare(theirs, annotations)))
    assert expected is not None
    assert _error(lambda: records.record(_declare(mine, annotations))) == expected
    body = {"__annotations__": annotations, "__module__": __name__, "__qualname__": "Bad", **mine}
    assert _error(lambda: records.record("Bad", (), body)) == expected  # as the metaclass


def test_a_class_variable_is_refused_rather_than_taken_for_a_field() -> None:
    with pytest.raises(TypeError, match="ClassVar"):
        records.record(_declare({}, {"a": "ClassVar[int]"}))


def test_a_records_dataclass_parts_are_made_only_when_read() -> None:
    """Making records imports neither dataclasses nor inspect; reading their fields does, once."""
    code = (
        "import sys\nfrom ptxtool.syntax import ast\n"
        "before = sorted(m for m in ('dataclasses', 'inspect') if m in sys.modules)\n"
        "import dataclasses\n"
        "names = [f.name for f in dataclasses.fields(ast.Instruction)]\n"
        "assert ast.Instruction.__dataclass_fields__ is ast.Instruction.__dict__['__dataclass_fields__']\n"
        "assert dataclasses.fields(ast.Instruction)[0] is ast.Owner.__dataclass_fields__['leading']\n"
        "print(before, names)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[0] == (
        "[] ['leading', 'trailing', 'line', 'column', 'end_line', 'opcode', 'modifiers', 'operands', 'guard']"
    )


def test_the_compiled_inits_are_cached_in_one_file_read_once(tmp_path: Path) -> None:
    """One cache file for every module's records: a second run compiles nothing and writes nothing; a damaged file
    is compiled again and rewritten; a cache that cannot be written costs only the compiling."""
    code = (
        "import builtins, sys\ncompiled = []\nreal = builtins.compile\n"
        "builtins.compile = lambda source, name, *a, **k: (compiled.append(name), real(source, name, *a, **k))[1]\n"
        "from ptxtool.syntax import format_module, parse\nfrom ptxtool.services import fmt\n"
        "assert format_module(parse('.version 8.0\\n.target sm_80\\n.address_size 64\\n')).startswith('.version')\n"
        "print(sum(name.startswith('<records of') for name in compiled))\n"
    )

    def run(cache: Path) -> int:
        env = dict(os.environ, PTXTOOL_CACHE_DIR=str(cache))
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        return int(done.stdout)

    cache = tmp_path / "cache"
    assert run(cache) >= 8  # every module's records compiled (errors, sources, fmt, ast, the parser's)
    (written,) = cache.glob("records-*.marshal")
    stamp = written.stat().st_mtime_ns
    assert run(cache) == 0 and written.stat().st_mtime_ns == stamp
    written.write_bytes(b"not marshal")
    assert run(cache) >= 8 and run(cache) == 0
    blocked = tmp_path / "file"
    blocked.write_text("", encoding="utf-8")
    assert run(blocked / "cache") >= 8  # no cache directory can be made under a file: compiled, and it still works


def _body() -> dict[str, object]:
    """A class body that defines methods dataclass leaves alone, and a __post_init__ it calls."""

    def __repr__(self: object) -> str:
        return "mine"

    def __eq__(self: object, other: object) -> bool:
        return True

    def __post_init__(self: object) -> None:
        if self.a < 0:
            raise ValueError("negative")

    return {"__annotations__": {"a": "int", "b": "int"}, "b": 2, "__module__": __name__, **locals()}


def test_a_record_keeps_the_methods_its_body_defines_as_dataclass_does() -> None:
    mine = records.record(type("Own", (), _body()))
    records.finish((mine,))
    theirs = dataclasses.dataclass(frozen=True, slots=True)(type("Own", (), _body()))
    for cls in (mine, theirs):
        assert repr(cls(1)) == "mine" and cls(1) == cls(5) and hash(cls(1)) == hash((1, 2))
        with pytest.raises(ValueError, match="negative"):
            cls(-1)
    assert str(inspect.signature(mine)) == str(inspect.signature(theirs))
    assert _error(lambda: records.record(type("Bad", (), {"__setattr__": _body()["__repr__"]}))) == _error(
        lambda: dataclasses.dataclass(frozen=True, slots=True)(type("Bad", (), {"__setattr__": _body()["__repr__"]}))
    )


def test_a_record_keeps_its_own_hash_as_dataclass_does() -> None:
    body = {"__annotations__": {"a": "int"}, "__module__": __name__, "__hash__": lambda self: 7}
    mine = records.record(type("Hashed", (), dict(body)))
    records.finish((mine,))
    theirs = dataclasses.dataclass(frozen=True, slots=True)(type("Hashed", (), dict(body)))
    assert hash(mine(1)) == hash(theirs(1)) == 7 and mine(1) == mine(1) != mine(2)


def test_as_the_metaclass_a_record_class_is_made_once() -> None:
    """`class C(metaclass=record)` makes one class, with its slots (a base's `__init_subclass__` runs once); the
    decorator, like dataclass's `slots=True`, makes a class and then its slotted copy."""
    made: list[str] = []

    class Base:
        __slots__ = ()

        def __init_subclass__(cls) -> None:
            made.append(cls.__qualname__)

    class Once(Base, metaclass=records.record):
        a: int

    @records.record
    class Twice(Base):
        a: int

    records.finish((Once, Twice))
    assert made.count(Once.__qualname__) == 1 and made.count(Twice.__qualname__) == 2
    assert type(Once) is type and Once.__slots__ == ("a",) and not hasattr(Once(1), "__dict__")


def test_as_the_metaclass_a_record_with_several_bases_is_its_dataclass() -> None:
    """Fields and slots collected in the merged order of several bases, as dataclass collects them."""

    class Mixin:
        __slots__ = ()

        def shout(self) -> str:
            return "hi"

    def declare(make: object, twin: bool) -> type:
        field = dataclasses.field if twin else records.field
        namespace = {"__annotations__": {"a": "int", "k": "int"}, "__module__": __name__, "k": field(kw_only=True)}
        first = make("First", (), dict(namespace, __qualname__="First"))
        namespace = {"__annotations__": {"b": "str"}, "__module__": __name__, "b": "x"}
        return make("Second", (first, Mixin), dict(namespace, __qualname__="Second"))

    frozen = dataclasses.dataclass(frozen=True, slots=True)
    mine, theirs = declare(records.record, False), declare(lambda *made: frozen(type(*made)), True)
    records.finish((mine.__mro__[1], mine))
    assert [f.name for f in dataclasses.fields(mine)] == [f.name for f in dataclasses.fields(theirs)] == ["a", "k", "b"]
    assert mine.__slots__ == theirs.__slots__ and mine.__match_args__ == theirs.__match_args__
    assert str(inspect.signature(mine)) == str(inspect.signature(theirs))
    assert repr(mine(1, k=2)) == repr(theirs(1, k=2)) and mine(1, k=2).shout() == "hi"
