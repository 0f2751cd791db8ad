"""Which rules run and how: `[tool.ptxtool.lint]` in the nearest pyproject.toml, overridden by command-line flags.

[tool.ptxtool.lint]
select = ["PTX"]              # ids, id prefixes or rule names; default: every rule
ignore = ["PTX005"]
ptxas = true                  # false: skip the rules that run ptxas (as --no-ptxas)
require-nvcc = false          # true: a .cu/.cuh file without nvcc is an error, not a notice
fail-on = "note"              # the least severity that makes the exit code 1 ("warning": notes only inform)
arch = "sm_90a"               # target for .cu files and ptxas (default: nvcc's, the module's .target)

[tool.ptxtool.lint.PTX003]    # per-rule options, by id or name; `severity` for every rule
register-file = 65536
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ptxtool.errors import InputError
from ptxtool.lint.registry import SEVERITIES, Rule, all_rules

_GLOBAL_KEYS = {"select": list, "ignore": list, "ptxas": bool, "require-nvcc": bool, "arch": str, "fail-on": str}


@dataclass(frozen=True)
class LintSettings:
    select: tuple[str, ...] = ("PTX",)
    ignore: tuple[str, ...] = ()
    ptxas: bool = True
    require_nvcc: bool = False
    arch: str | None = None
    fail_on: str = "note"
    rule_options: dict[str, dict] = field(default_factory=dict)  # rule id -> options given by the user


def _matches(token: str, r: Rule) -> bool:
    return token in (r.id, r.name, "ALL") or (token.startswith("PTX") and r.id.startswith(token))


def _check_tokens(tokens: tuple[str, ...], where: str) -> None:
    rules = all_rules().values()
    unknown = [t for t in tokens if not any(_matches(t, r) for r in rules)]
    if unknown:
        known = ", ".join(f"{r.id} ({r.name})" for r in rules)
        raise InputError.at(where, f"unknown lint rule {', '.join(map(repr, unknown))}; rules are: {known}")


def _rule_options(config: dict, where: str) -> dict[str, dict]:
    rules = all_rules()
    by_name = {r.name: r for r in rules.values()}
    out: dict[str, dict] = {}
    for key, value in config.items():
        if key in _GLOBAL_KEYS:
            continue
        r = rules.get(key) or by_name.get(key)
        if r is None or not isinstance(value, dict):
            raise InputError.at(where, f"[tool.ptxtool.lint]: unknown setting or rule {key!r}")
        for option, setting in value.items():
            default = r.options.get(option)
            if option == "severity":
                if setting not in SEVERITIES:
                    raise InputError.at(where, f"[tool.ptxtool.lint.{key}] severity must be one of {SEVERITIES}")
            elif option not in r.options or type(setting) is not type(default):
                expected = ", ".join(f"{k} ({type(v).__name__})" for k, v in r.options.items()) or "none"
                raise InputError.at(where, f"[tool.ptxtool.lint.{key}] bad option {option!r}; {r.id} takes: {expected}")
            elif isinstance(setting, int | float) and not isinstance(setting, bool) and setting < 0:
                raise InputError.at(where, f"[tool.ptxtool.lint.{key}] {option} must not be negative; got {setting}")
        out.setdefault(r.id, {}).update(value)
    return out


def load_settings(
    config: dict,
    where: str,
    *,
    select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    ptxas: bool | None = None,
    require_nvcc: bool | None = None,
    arch: str | None = None,
    fail_on: str | None = None,
) -> LintSettings:
    """Settings from a `[tool.ptxtool.lint]` table that config.load checked (`where` names it in errors) and flags
    (empty/None: not given)."""
    chosen = tuple(select) or tuple(config.get("select", ("PTX",)))
    dropped = tuple(ignore) or tuple(config.get("ignore", ()))
    fail = fail_on or config.get("fail-on", "note")
    _check_tokens(chosen, "--select" if select else where)
    _check_tokens(dropped, "--ignore" if ignore else where)
    return LintSettings(
        chosen,
        dropped,
        config.get("ptxas", True) if ptxas is None else ptxas,
        config.get("require-nvcc", False) if require_nvcc is None else require_nvcc,
        arch or config.get("arch"),
        fail,
        _rule_options(config, where),
    )


def active_rules(settings: LintSettings) -> list[Rule]:
    """The rules selected and not ignored, in id order."""
    return [
        r
        for r in all_rules().values()
        if any(_matches(t, r) for t in settings.select) and not any(_matches(t, r) for t in settings.ignore)
    ]


def options_for(settings: LintSettings, r: Rule) -> dict:
    """A rule's options: its defaults, then what the config says."""
    return r.options | {k: v for k, v in settings.rule_options.get(r.id, {}).items() if k != "severity"}


def severity_for(settings: LintSettings, r: Rule) -> str:
    return settings.rule_options.get(r.id, {}).get("severity", r.severity)


def fails(fail_on: str, severity: str) -> bool:
    """Whether a finding of this severity makes the run fail (exit 1) when `fail_on` is the least that does."""
    return SEVERITIES.index(severity) <= SEVERITIES.index(fail_on)
