"""Frozen slotted dataclasses made without importing `dataclasses`: the syntax tree's, and those every run imports.

`@dataclass(frozen=True, slots=True)` imports `dataclasses` (and with it `inspect`, `ast`, `dis`, `tokenize`: 15 ms,
more than a `fmt` of a small file) and compiles six small functions per class, one `exec` each. `record` makes the same
class, as the metaclass (`class Node(metaclass=record):`, the class made once) or as a decorator (`@record`, the class
made again from its namespace, as dataclass's `slots=True` does): its `__slots__` and `__match_args__` from the
annotations, defaults and `field()` options as dataclass reads them, and the methods `frozen=True, slots=True` writes
(`__repr__`, `__eq__`, `__hash__`, frozen `__setattr__` and `__delattr__`, `__getstate__`/`__setstate__`) as closures
over the fields' names; `finish(classes)` then gives them the `__init__`s, compiled as one source (a node's is called
millions of times, and must have the signature dataclass writes). Compiling costs as much as the exec calls did, so the
code is kept in the cache directory (with its source and the Python it was compiled by, both checked on load), as Python
keeps a module's bytecode. What `dataclasses.fields`, `replace`, `asdict` and `is_dataclass` read
(`__dataclass_fields__`, `__dataclass_params__`), and the docstring dataclass writes from the signature, are made on
first access: only code that asks for them imports `dataclasses`. A record's frozen-field error is
`dataclasses.FrozenInstanceError`, imported when raised. tests/test_records.py compares every record class with the
dataclass made of the same class body.
"""

from __future__ import annotations

import marshal
import os
import sys
from _thread import get_ident
from operator import attrgetter
from types import CodeType

from ptxtool.cache import cache_directory, checksum

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


def record(cls: type | str, bases: tuple[type, ...] | None = None, namespace: dict | None = None, /) -> type:
    """The class as a frozen slotted dataclass but for its `__init__`, which `finish` gives it. As a metaclass
    (`class Node(metaclass=record):`) the class is made once, with its slots; as a decorator (`@record`) it is made
    again from the class's namespace, as dataclass's `slots=True` does."""
    if bases is None:
        namespace = dict(cls.__dict__)
        namespace.pop("__dict__", None)
        namespace.pop("__weakref__", None)
        namespace["__qualname__"] = cls.__qualname__
        return _make(type(cls), cls.__name__, cls.__bases__, namespace, cls.__mro__[1:])
    if len(bases) > 1:  # the merged order dataclass walks, from a class made only to compute it
        above = type("_", bases, {}).__mro__[1:]
    else:
        above = bases[0].__mro__ if bases else (object,)
    return _make(type, cls, bases, namespace, above)


def _make(kind: type, class_name: str, bases: tuple[type, ...], namespace: dict, above: tuple[type, ...]) -> type:
    """The record class `class_name` of `namespace` (changed in place), its bases' classes in order `above`."""
    qualname = namespace.get("__qualname__", class_name)
    wanted = _wanted(namespace, class_name)
    fields: dict[str, tuple[str, object, Field, type | None]] = {}
    for base in reversed(above[:-1]):  # as dataclass collects them: the farthest base first
        if base in _RECORDS:
            fields.update((f[0], f) for f in _RECORDS[base])
        elif "__dataclass_fields__" in base.__dict__:
            raise TypeError(f"{qualname}: a record's dataclass bases must be records, not {base.__qualname__}")
    own = namespace.get("__annotations__", {})
    for name, annotation in own.items():
        spelled = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if spelled.startswith(_NOT_FIELDS):
            raise TypeError(f"{qualname}.{name}: records have no {spelled.split('[')[0]} fields")
        value = namespace.pop(name, MISSING)
        if isinstance(value, Field):
            options = value
        elif value is MISSING:
            options = _PLAIN
        elif value.__class__.__hash__ is None:  # dataclass's rule: a list, dict or set default would be shared
            raise ValueError(f"mutable default {type(value)} for field {name} is not allowed: use default_factory")
        else:
            options = Field(value, MISSING, True, True, False)
        fields[name] = (name, annotation, options, None)  # None: this class, not made yet
    for key, value in namespace.items():
        if isinstance(value, Field) and key not in own:
            raise TypeError(f"{key!r} is a field but has no type annotation")
    defaulted = False
    names, compared, shown, positional = [], [], [], []  # one pass over the fields for every list the class needs
    for name, _, options, _ in fields.values():
        names.append(name)
        if options.compare:
            compared.append(name)
        if options.repr:
            shown.append(name)
        if options.kw_only:
            continue
        positional.append(name)
        if options.default is not MISSING or options.default_factory is not MISSING:
            defaulted = True
        elif defaulted:
            raise TypeError(f"non-default argument {name!r} follows default argument")
    if len(above) > 1:  # fields inherited from a record base: their slots are the base's
        inherited: set[str] = set()
        for base in above[:-1]:
            slots = base.__dict__.get("__slots__", ())
            inherited.update((slots,) if isinstance(slots, str) else slots)
        namespace["__slots__"] = tuple([name for name in names if name not in inherited])
        for name in names:  # an inherited field's default, as dataclass's slots=True leaves none on the class
            namespace.pop(name, None)
    else:
        namespace["__slots__"] = tuple(names)
    if "__match_args__" not in namespace:
        namespace["__match_args__"] = tuple(positional)
    namespace["__dataclass_fields__"] = _Lazy(_dataclass_fields)
    namespace["__dataclass_params__"] = _Lazy(_dataclass_params)
    if not namespace.get("__doc__"):
        namespace["__doc__"] = _Lazy(_signature_doc)
    methods, bind = _methods(tuple(names), tuple(compared), tuple(shown))
    for method in wanted:  # in the class as it is made: setting a method on a class later costs more
        if method != "__init__":
            function = namespace[method] = methods[method]
            function.__qualname__ = f"{qualname}.{method}"
    made = kind(class_name, bases, namespace)
    bind(made)
    _RECORDS[made] = tuple((f, a, options, origin or made) for f, a, options, origin in fields.values())
    return made


def is_record(cls: type) -> bool:
    """Whether `@record` made this very class."""
    return cls in _RECORDS


_NAMES: dict[type, tuple[str, ...]] = {}  # field_names' answers


def field_names(cls: type) -> tuple[str, ...]:
    """The names of the fields of a record class or of a class derived from one (`dataclasses.fields`' order)."""
    names = _NAMES.get(cls)
    if names is None:
        made = next((klass for klass in cls.__mro__ if klass in _RECORDS), None)
        if made is None:
            raise TypeError(f"{cls.__qualname__} is not a record")
        names = _NAMES[cls] = tuple(f[0] for f in _RECORDS[made])
    return names


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
if sys.version_info >= (3, 13):  # copy.replace's protocol, which dataclass writes since 3.13
    _METHODS += ("__replace__",)


def _wanted(own: dict[str, object], name: str) -> tuple[str, ...]:
    """The methods dataclass would write on a class: those its body (`own`) does not define itself."""
    if own.keys().isdisjoint(_METHODS):  # as nearly every record: no method of its own
        return _METHODS
    for method in ("__setattr__", "__delattr__"):
        if method in own:
            raise TypeError(f"Cannot overwrite attribute {method} in class {name}")
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    return tuple(m for m in _METHODS if (not explicit_hash if m == "__hash__" else m not in own))


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


def _methods(
    names: tuple[str, ...], compared_names: tuple[str, ...], shown: tuple[str, ...]
) -> tuple[dict[str, Any], Any]:
    """The methods besides `__init__` that `@dataclass(frozen=True, slots=True)` writes, as closures over the
    class's fields (all `names`, those `compared` and those `shown` by repr): they run as fast as compiled ones (the
    values are fetched in C), and cost no compiling. The function returned with them binds them to the class, once
    it is made."""
    cls = None
    every, compared = _values(names), _values(compared_names)
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

    def __replace__(self: Any, /, **changes: object) -> Any:
        return replace(self, **changes)

    def bind(made: type) -> None:
        nonlocal cls
        cls = made

    methods = {
        "__repr__": __repr__,
        "__eq__": __eq__,
        "__hash__": __hash__,
        "__setattr__": __setattr__,
        "__delattr__": __delattr__,
        "__getstate__": __getstate__,
        "__setstate__": __setstate__,
        "__replace__": __replace__,
    }
    return methods, bind


def finish(classes: tuple[type, ...]) -> None:
    """Give each `@record` class the `__init__` of `@dataclass(frozen=True, slots=True)` (unless it has its own),
    all compiled together: a node's is called millions of times."""
    namespace: dict[str, object] = {"_factory": _FACTORY, "__name__": classes[0].__module__}
    tagged = [(cls, f"_{n}") for n, cls in enumerate(classes) if "__init__" not in cls.__dict__]
    source = "".join(_init(cls, tag, namespace) for cls, tag in tagged)
    exec(_CACHE.code(source, f"<records of {classes[0].__module__}.{classes[0].__qualname__}>"), namespace)  # noqa: S102 - our own source
    for cls, tag in tagged:
        init = namespace[f"{tag}___init__"]
        init.__name__, init.__qualname__ = "__init__", f"{cls.__qualname__}.__init__"
        init.__annotations__ = {**{f[0]: f[1] for f in _RECORDS[cls]}, "return": None}
        cls.__init__ = init


class _Cache:
    """The compiled `__init__`s of every module that makes records, in one file per installed package (each entry
    with its source, the whole with the Python that compiled it): read once, at the first `finish`, rather than a
    file per module; an entry whose source changed is compiled again and the file rewritten."""

    def __init__(self) -> None:
        self.path: str | None = None
        self.entries: dict[str, tuple[str, CodeType]] | None = None

    def load(self) -> dict[str, tuple[str, CodeType]]:
        directory, why = cache_directory()
        if directory is not None and why is None:
            package = os.path.dirname(os.path.abspath(__file__))
            name = f"records-{checksum(package)}-{sys.implementation.cache_tag}.marshal"
            self.path = os.path.join(directory, name)
        self.entries = {}
        if self.path is not None:
            try:
                with open(self.path, "rb", buffering=0) as f:
                    version, entries = marshal.loads(f.read())
                if version == sys.version and type(entries) is dict:
                    self.entries = entries
            except Exception:  # noqa: BLE001 - missing, unreadable, another version's: compiled and rewritten
                pass
        return self.entries

    def code(self, source: str, name: str) -> CodeType:
        """The code of `source`: the cached one when it was compiled from this very source, else compiled now."""
        entries = self.load() if self.entries is None else self.entries
        entry = entries.get(name)
        if type(entry) is tuple and len(entry) == 2 and entry[0] == source and isinstance(entry[1], CodeType):
            return entry[1]
        code = compile(source, name, "exec")
        entries[name] = (source, code)
        if self.path is not None:
            self.write(self.path, entries)
        return code

    @staticmethod
    def write(path: str, entries: dict[str, tuple[str, CodeType]]) -> None:
        import tempfile  # only here: a run that finds its code never needs it

        directory = os.path.dirname(path)
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".records-", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(marshal.dumps((sys.version, entries)))
            os.replace(tmp, path)  # another run's entries written meanwhile are lost: compiled again when needed
        except OSError:  # a read-only cache: the code still works, it is only compiled again next time
            pass


_CACHE = _Cache()
