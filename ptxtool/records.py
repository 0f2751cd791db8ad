"""Frozen slotted dataclasses made without importing `dataclasses`: the syntax tree's, and those every run imports.

`@dataclass(frozen=True, slots=True)` imports `dataclasses` (and with it `inspect`, `ast`, `dis`, `tokenize`: 15 ms,
more than a `fmt` of a small file) and compiles six small functions per class, one `exec` each. `@record` makes the
same class (its `__slots__` and `__match_args__` from the annotations, defaults and `field()` options as dataclass
reads them), and `finish(classes)` then writes the methods `frozen=True, slots=True` would (`__init__`, `__repr__`,
`__eq__`, `__hash__`, frozen `__setattr__` and `__delattr__`, `__getstate__`/`__setstate__`) for all of them, compiled
as one source. Compiling it costs as much as the exec calls did, so its code is kept in the cache directory (with the
source and the Python it was compiled by, both checked on load), as Python keeps a module's bytecode. What
`dataclasses.fields`, `replace`, `asdict` and `is_dataclass` read (`__dataclass_fields__`, `__dataclass_params__`),
and the docstring dataclass writes from the signature, are made on first access: only code that asks for them
imports `dataclasses`. A record's frozen-field error is `dataclasses.FrozenInstanceError`, imported when raised.
"""

from __future__ import annotations

import marshal
import os
import sys
import zlib
from _thread import get_ident
from operator import attrgetter
from types import CodeType

from ptxtool.cache import cache_directory

TYPE_CHECKING = False  # typing's own constant costs the import of typing (4 ms); type checkers read this one too
if TYPE_CHECKING:
    from typing import Any


class _Missing:
    """No default: dataclasses' MISSING, which records cannot import."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<MISSING>"


MISSING = _Missing()


class Field:
    """A field's options, as `dataclasses.field` takes them (the ones records support)."""

    __slots__ = ("default", "default_factory", "repr", "compare", "kw_only")

    def __init__(self, default: object, default_factory: object, repr: bool, compare: bool, kw_only: bool) -> None:
        self.default, self.default_factory, self.repr, self.compare = default, default_factory, repr, compare
        self.kw_only = kw_only


def field(
    *,
    default: object = MISSING,
    default_factory: object = MISSING,
    repr: bool = True,
    compare: bool = True,
    kw_only: bool = False,
) -> Any:
    """`dataclasses.field` for a record."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(default, default_factory, repr, compare, kw_only)


_PLAIN = Field(MISSING, MISSING, True, True, False)
# each record's fields in order, as (name, annotation, options, the class whose annotation made it)
_RECORDS: dict[type, tuple[tuple[str, object, Field, type], ...]] = {}
_NOT_FIELDS = ("ClassVar", "typing.ClassVar", "InitVar", "dataclasses.InitVar", "KW_ONLY", "dataclasses.KW_ONLY")


def record(cls: type) -> type:
    """The class as a slotted dataclass with no methods yet: `finish` gives it those of a frozen one."""
    namespace = dict(cls.__dict__)
    fields: dict[str, tuple[str, object, Field, type]] = {}
    for base in cls.__mro__[-1:0:-1]:  # as dataclass collects them: the farthest base first
        if base in _RECORDS:
            fields.update((f[0], f) for f in _RECORDS[base])
        elif "__dataclass_fields__" in base.__dict__:
            raise TypeError(f"{cls.__qualname__}: a record's dataclass bases must be records, not {base.__qualname__}")
    own = namespace.get("__annotations__", {})
    for name, annotation in own.items():
        spelled = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if spelled.startswith(_NOT_FIELDS):
            raise TypeError(f"{cls.__qualname__}.{name}: records have no {spelled.split('[')[0]} fields")
        value = namespace.pop(name, MISSING)
        if isinstance(value, Field):
            options = value
        elif value is MISSING:
            options = _PLAIN
        elif value.__class__.__hash__ is None:  # dataclass's rule: a list, dict or set default would be shared
            raise ValueError(f"mutable default {type(value)} for field {name} is not allowed: use default_factory")
        else:
            options = Field(value, MISSING, True, True, False)
        fields[name] = (name, annotation, options, cls)
    for name, value in namespace.items():
        if isinstance(value, Field) and name not in own:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    defaulted = False
    for name, _, options, _ in fields.values():
        if options.kw_only:
            continue
        if options.default is not MISSING or options.default_factory is not MISSING:
            defaulted = True
        elif defaulted:
            raise TypeError(f"non-default argument {name!r} follows default argument")
    inherited = set()
    for base in cls.__mro__[1:-1]:
        slots = base.__dict__.get("__slots__", ())
        inherited.update((slots,) if isinstance(slots, str) else slots)
    namespace["__slots__"] = tuple(name for name in fields if name not in inherited)
    for name in fields:  # an inherited field's default, as dataclass's slots=True leaves none on the class
        namespace.pop(name, None)
    namespace.pop("__dict__", None)
    namespace.pop("__weakref__", None)
    if "__match_args__" not in namespace:
        namespace["__match_args__"] = tuple(name for name, _, options, _ in fields.values() if not options.kw_only)
    namespace["__dataclass_fields__"] = _Lazy(_dataclass_fields)
    namespace["__dataclass_params__"] = _Lazy(_dataclass_params)
    if not namespace.get("__doc__"):
        namespace["__doc__"] = _Lazy(_signature_doc)
    made = type(cls)(cls.__name__, cls.__bases__, namespace)
    made.__qualname__ = cls.__qualname__
    _RECORDS[made] = tuple(
        (name, a, options, made if origin is cls else origin) for name, a, options, origin in fields.values()
    )
    return made


def is_record(cls: type) -> bool:
    """Whether `@record` made this very class."""
    return cls in _RECORDS


def field_names(cls: type) -> tuple[str, ...]:
    """The names of the fields of a record class or of a class derived from one (`dataclasses.fields`' order)."""
    for klass in cls.__mro__:
        if klass in _RECORDS:
            return tuple(f[0] for f in _RECORDS[klass])
    raise TypeError(f"{cls.__qualname__} is not a record")


def replace(obj: object, /, **changes: object) -> Any:
    """`dataclasses.replace` for a record: a new one with `changes`, without importing dataclasses."""
    for name in field_names(obj.__class__):
        if name not in changes:
            changes[name] = getattr(obj, name)
    return obj.__class__(**changes)


class _Lazy:
    """A class attribute dataclasses (or help()) reads, made on first access and then stored in its place."""

    __slots__ = ("make", "owner", "name")

    def __init__(self, make: Any) -> None:
        self.make = make

    def __set_name__(self, owner: type, name: str) -> None:
        self.owner, self.name = owner, name

    def __get__(self, instance: object, owner: type | None = None) -> object:
        value = self.make(self.owner)
        type.__setattr__(self.owner, self.name, value)
        return value


def _dataclass_fields(cls: type) -> dict[str, object]:
    """The `dataclasses.Field`s dataclass would have made (an inherited field's is the base's own object)."""
    import dataclasses

    out: dict[str, object] = {}
    for name, annotation, options, origin in _RECORDS[cls]:
        if origin is not cls:
            out[name] = origin.__dataclass_fields__[name]
            continue
        given: dict[str, object] = {"repr": options.repr, "compare": options.compare, "kw_only": options.kw_only}
        if options.default is not MISSING:
            given["default"] = options.default
        if options.default_factory is not MISSING:
            given["default_factory"] = options.default_factory
        made = dataclasses.field(**given)
        made.name, made.type, made._field_type = name, annotation, dataclasses._FIELD
        out[name] = made
    return out


_PARAMS: list[object] = []


def _dataclass_params(cls: type) -> object:
    """The parameters of `@dataclass(frozen=True, slots=True)`, as this Python's dataclasses holds them."""
    if not _PARAMS:
        import dataclasses

        _PARAMS.append(dataclasses.dataclass(frozen=True, slots=True)(type("Params", (), {})).__dataclass_params__)
    return _PARAMS[0]


def _signature_doc(cls: type) -> str:
    """The docstring dataclass gives a class without one: its name and signature."""
    import inspect

    return cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")


class _Factory:
    """The default of a field with a `default_factory`: the factory is called when no value is given."""

    def __repr__(self) -> str:
        return "<factory>"  # as dataclass shows it in the signature


_FACTORY = _Factory()
_METHODS = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__getstate__", "__setstate__")


def _wanted(cls: type) -> tuple[str, ...]:
    """The methods dataclass would write on `cls`: those the class body does not define itself."""
    own = cls.__dict__
    for method in ("__setattr__", "__delattr__"):
        if method in own:
            raise TypeError(f"Cannot overwrite attribute {method} in class {cls.__name__}")
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    return tuple(m for m in _METHODS if m not in own and not (m == "__hash__" and explicit_hash))


def _init(cls: type, tag: str, namespace: dict[str, object]) -> str:
    """The source of the class's `__init__`, named `<tag>___init__`; its defaults go into `namespace`."""
    params, keywords, body = [], [], []
    for name, _, options, _ in _RECORDS[cls]:
        value = name
        if options.default_factory is not MISSING:
            namespace[f"{tag}_f_{name}"] = options.default_factory
            param = f"{name}=_factory"
            value = f"{tag}_f_{name}() if {name} is _factory else {name}"
        elif options.default is MISSING:
            param = name
        else:
            namespace[f"{tag}_d_{name}"] = options.default
            param = f"{name}={tag}_d_{name}"
        (keywords if options.kw_only else params).append(param)
        namespace[f"{tag}_s_{name}"] = _slot(cls, name).__set__
        body.append(f"    {tag}_s_{name}(self, {value})\n")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()\n")
    signature = ", ".join(["self", *params, *(["*", *keywords] if keywords else [])])
    return f"def {tag}___init__({signature}):\n" + ("".join(body) or "    pass\n")


def _slot(cls: type, name: str) -> Any:
    """The slot that holds field `name` (the class's own, or a base's): setting through it skips the generic
    `object.__setattr__` lookup, which made a node's `__init__` cost twice as much."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise TypeError(f"{cls.__qualname__}.{name} has no slot")


def _values(names: tuple[str, ...]) -> Any:
    """The function giving a record's values of `names` as one tuple, in C (`(self.a, self.b)`, as dataclass's
    methods write it)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(*names)
        return lambda self: (one(self),)
    return lambda self: ()


def _frozen(message: str) -> Exception:
    """The error of assigning to a frozen dataclass's field, dataclasses' own class (imported only now)."""
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(message)


def _methods(cls: type) -> dict[str, Any]:
    """The methods besides `__init__` that `@dataclass(frozen=True, slots=True)` writes, as closures over the
    class's fields: they run as fast as compiled ones (the values are fetched in C), and cost no compiling."""
    fields = _RECORDS[cls]
    names = tuple(f[0] for f in fields)
    every, compared = _values(names), _values(tuple(f[0] for f in fields if f[2].compare))
    shown = tuple(f[0] for f in fields if f[2].repr)
    running: set[tuple[int, int]] = set()

    def __repr__(self: Any) -> str:
        key = id(self), get_ident()
        if key in running:  # as dataclass's _recursive_repr: "..." for a record inside itself
            return "..."
        running.add(key)
        try:
            return f"{self.__class__.__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in shown)})"
        finally:
            running.discard(key)

    def __eq__(self: Any, other: object) -> Any:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(compared(self))

    def __setattr__(self: Any, name: str, value: object) -> None:
        if type(self) is cls or name in names:
            raise _frozen(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise _frozen(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    def __getstate__(self: Any) -> list[object]:
        return list(every(self))

    def __setstate__(self: Any, state: list[object]) -> None:
        for name, value in zip(names, state, strict=False):
            object.__setattr__(self, name, value)

    return {
        "__repr__": __repr__,
        "__eq__": __eq__,
        "__hash__": __hash__,
        "__setattr__": __setattr__,
        "__delattr__": __delattr__,
        "__getstate__": __getstate__,
        "__setstate__": __setstate__,
    }


def finish(classes: tuple[type, ...]) -> None:
    """Give each `@record` class the methods of `@dataclass(frozen=True, slots=True)`; the `__init__`s (a node's
    is called millions of times) are compiled together."""
    namespace: dict[str, object] = {"_factory": _FACTORY, "__name__": classes[0].__module__}
    tagged = [(cls, f"_{n}", _wanted(cls)) for n, cls in enumerate(classes)]
    source = "".join(_init(cls, tag, namespace) for cls, tag, wanted in tagged if "__init__" in wanted)
    exec(_compiled(source, f"<records of {classes[0].__module__}>"), namespace)  # noqa: S102 - our own source
    for cls, tag, wanted in tagged:
        methods = _methods(cls)
        if "__init__" in wanted:
            methods["__init__"] = namespace[f"{tag}___init__"]
            methods["__init__"].__annotations__ = {**{f[0]: f[1] for f in _RECORDS[cls]}, "return": None}
        for method in wanted:
            function = methods[method]
            function.__name__, function.__qualname__ = method, f"{cls.__qualname__}.{method}"
            setattr(cls, method, function)


def _compiled(source: str, name: str) -> CodeType:
    """The code of `source`: from the cache when it holds this very source compiled by this very Python, else
    compiled now and cached (a missing, stale or unreadable entry is rewritten; no cache: compiled each run)."""
    directory, why = cache_directory()
    key = f"{zlib.crc32(source.encode()):08x}-{sys.implementation.cache_tag}"
    path = os.path.join(directory, f"records-{key}.marshal") if directory is not None and why is None else None
    if path is not None:
        try:
            with open(path, "rb") as f:
                version, cached_source, code = marshal.loads(f.read())
            if version == sys.version and cached_source == source and isinstance(code, CodeType):
                return code
        except Exception:  # noqa: BLE001 - missing, unreadable, from another version: compile and rewrite it
            pass
    code = compile(source, name, "exec")
    if path is not None:
        import tempfile  # only here: a run that finds its code never needs it

        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".records-", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(marshal.dumps((sys.version, source, code)))
            os.replace(tmp, path)
        except OSError:  # a read-only cache: the code still works, it is only compiled again next time
            pass
    return code
