"""Frozen slotted dataclasses whose methods are compiled in one go: the syntax tree's, and those every run imports.

`@dataclass(frozen=True, slots=True)` compiles six small functions per class, one `exec` each; for the syntax tree's
thirty-odd classes that was the largest part of every command's start-up. `@record` makes the same dataclass
(fields, `dataclasses.fields`/`replace`, slots, `__match_args__`) without them, and `finish(classes)` then writes the
methods `frozen=True, slots=True` would (`__init__`, `__repr__`, `__eq__`, `__hash__`, frozen `__setattr__` and
`__delattr__`, `__getstate__`/`__setstate__`) for all of them, compiled as one source. Compiling it costs as much as
the exec calls did, so its code is kept in the cache directory (with the source and the Python it was compiled by,
both checked on load), as Python keeps a module's bytecode.
"""

from __future__ import annotations

import marshal
import os
import sys
import zlib
from dataclasses import MISSING, FrozenInstanceError, dataclass, fields
from types import CodeType

from ptxtool.cache import cache_directory

_record = dataclass(slots=True, init=False, repr=False, eq=False)


def record(cls: type) -> type:
    """A slotted dataclass with no methods yet: `finish` gives it those of a frozen one."""
    if not cls.__doc__:  # dataclass would write one from inspect.signature, which for a class with no __init__ yet
        cls.__doc__ = f"{cls.__name__}({', '.join(cls.__annotations__)})"  # tokenizes object's: 10 ms of start-up
    return _record(cls)


class _Factory:
    """The default of a field with a `default_factory`: the factory is called when no value is given."""

    def __repr__(self) -> str:
        return "<factory>"  # as dataclass shows it in the signature


def _methods(cls: type, tag: str, namespace: dict[str, object]) -> str:
    """The source of one class's methods, each named `<tag>_<method>`; defaults go into `namespace`."""
    own = fields(cls)
    params, keywords, body = [], [], []
    for f in own:
        value = f.name
        if f.default_factory is not MISSING:
            namespace[f"{tag}_f_{f.name}"] = f.default_factory
            param = f"{f.name}=_factory"
            value = f"{tag}_f_{f.name}() if {f.name} is _factory else {f.name}"
        elif f.default is MISSING:
            param = f.name
        else:
            namespace[f"{tag}_d_{f.name}"] = f.default
            param = f"{f.name}={tag}_d_{f.name}"
        (keywords if f.kw_only else params).append(param)
        namespace[f"{tag}_s_{f.name}"] = _slot(cls, f.name).__set__
        body.append(f"    {tag}_s_{f.name}(self, {value})")
    signature = ", ".join(["self", *params, *(["*", *keywords] if keywords else [])])
    compared = "".join(f"self.{f.name}," for f in own if f.compare)
    other = "".join(f"other.{f.name}," for f in own if f.compare)
    shown = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in own if f.repr)
    names = tuple(f.name for f in own)
    return "\n".join(
        [
            f"def {tag}___init__({signature}):",
            *(body or ["    pass"]),
            f"def {tag}___repr__(self):",
            f'    return self.__class__.__qualname__ + f"({shown})"',
            f"def {tag}___eq__(self, other):",
            "    if other.__class__ is self.__class__:",
            f"        return ({compared}) == ({other})",
            "    return NotImplemented",
            f"def {tag}___hash__(self):",
            f"    return hash(({compared}))",
            f"def {tag}___getstate__(self):",
            f"    return [{', '.join(f'self.{n}' for n in names)}]",
            f"def {tag}___setstate__(self, state):",
            f"    for name, value in zip({names!r}, state):",
            "        _set(self, name, value)",
            "",
        ]
    )


_FACTORY = _Factory()


def _slot(cls: type, name: str) -> object:
    """The slot that holds field `name` (the class's own, or a base's): setting through it skips the generic
    `object.__setattr__` lookup, which made a node's `__init__` cost twice as much."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise TypeError(f"{cls.__qualname__}.{name} has no slot")


def _setattr(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def finish(classes: tuple[type, ...]) -> None:
    """Give each `@record` class the methods of `@dataclass(frozen=True, slots=True)`, compiled together."""
    namespace: dict[str, object] = {"_set": object.__setattr__, "_factory": _FACTORY, "__name__": classes[0].__module__}
    tagged = [(cls, f"_{n}") for n, cls in enumerate(classes)]
    source = "".join(_methods(cls, tag, namespace) for cls, tag in tagged)
    exec(_compiled(source, f"<records of {classes[0].__module__}>"), namespace)  # noqa: S102 - our own source
    for cls, tag in tagged:
        for method in ("__init__", "__repr__", "__eq__", "__hash__", "__getstate__", "__setstate__"):
            function = namespace[f"{tag}_{method}"]
            function.__name__, function.__qualname__ = method, f"{cls.__qualname__}.{method}"
            setattr(cls, method, function)
        cls.__init__.__annotations__ = {**{f.name: f.type for f in fields(cls)}, "return": None}
        cls.__setattr__, cls.__delattr__ = _setattr, _delattr


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
