"""click commands built when first used: click makes an Option object per `@click.option` as it decorates, and the
hundred options of all the commands cost every run of one of them as much as parsing a small file does
(benchmarks/startup.py). `option`/`argument` record the same decorators on the callback; the command is built from
them, in the same order, when the group looks it up by name (every one for --help)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping

import click


def _later(make: Callable) -> Callable:
    """`make` (click.option, click.argument) recorded on the callback, applied when its command is built."""

    def decorator(*args, **kwargs) -> Callable:
        def record(function: Callable) -> Callable:
            function.__dict__.setdefault("deferred", []).append((make, args, kwargs))
            return function

        return record

    return decorator


option, argument = _later(click.option), _later(click.argument)


class Deferred:
    """A command not built yet: its callback and click.command's arguments; reading an attribute builds it."""

    def __init__(self, name: str, function: Callable, attrs: dict[str, object]) -> None:
        self.name, self.function, self.attrs = name, function, attrs
        self.built: click.Command | None = None

    def build(self) -> click.Command:
        if self.built is None:
            function = self.function
            for make, args, kwargs in function.__dict__.get("deferred", ()):
                function = make(*args, **kwargs)(function)
            self.built = click.command(self.name, **self.attrs)(function)
        return self.built

    def __getattr__(self, name: str) -> object:
        return getattr(self.build(), name)


class Commands(MutableMapping):
    """A group's `commands`: every registered name, each built on first lookup."""

    def __init__(self) -> None:
        self.known: dict[str, Deferred | click.Command] = {}

    def command(self, name: str, **attrs: object) -> Callable[[Callable], Deferred]:
        """Register `name`'s callback (decorated by `option`/`argument`) as `click.command(name, **attrs)` would."""

        def register(function: Callable) -> Deferred:
            deferred = self.known[name] = Deferred(name, function, attrs)
            return deferred

        return register

    def __getitem__(self, name: str) -> click.Command:
        found = self.known[name]
        return found.build() if isinstance(found, Deferred) else found

    def __setitem__(self, name: str, command: click.Command) -> None:
        self.known[name] = command

    def __delitem__(self, name: str) -> None:
        del self.known[name]

    def __contains__(self, name: object) -> bool:
        return name in self.known

    def __iter__(self) -> Iterator[str]:
        return iter(self.known)

    def __len__(self) -> int:
        return len(self.known)
