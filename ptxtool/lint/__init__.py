"""`ptxtool lint`: rules with stable ids (PTX001...) over parsed PTX, its analyses and ptxas's warnings.

The service is `lint_files(paths, settings)`; rules live one module per rule or family in `lint/rules/`.
"""

from ptxtool.lint.registry import RULES, Hit, Rule, all_rules, rule
from ptxtool.lint.service import FileResult, Finding, lint_file, lint_files
from ptxtool.lint.settings import Settings, load_settings

__all__ = [
    "RULES",
    "FileResult",
    "Finding",
    "Hit",
    "Rule",
    "Settings",
    "all_rules",
    "lint_file",
    "lint_files",
    "load_settings",
    "rule",
]
