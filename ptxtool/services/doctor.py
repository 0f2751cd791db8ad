"""`ptxtool doctor`: which NVIDIA tools ptxtool found, where, their versions, and whether a GPU driver answers."""

from __future__ import annotations

from dataclasses import dataclass

from ptxtool.errors import EXIT_ENVIRONMENT, EXIT_OK

SCHEMA = "ptxtool.doctor/1"


@dataclass(frozen=True, slots=True)
class Options:
    pass


@dataclass(frozen=True)
class DoctorResult:
    tools: dict
    gpu_driver: dict

    @property
    def exit_code(self) -> int:
        return EXIT_ENVIRONMENT if any(t["required"] and not t["ok"] for t in self.tools.values()) else EXIT_OK

    def to_data(self) -> dict:
        return {"schema": SCHEMA, "tools": self.tools, "gpu_driver": self.gpu_driver}


def execute(options: Options, sources: list) -> DoctorResult:
    from ptxtool.toolchain.discover import environment

    found = environment()
    return DoctorResult(found["tools"], found["gpu_driver"])
