"""`ptxtool lint`: rules with stable ids (PTX001...) over parsed PTX, its analyses and ptxas's warnings.

The service is ptxtool/services/lint.py; rules live one module per rule or family in `lint/rules/`.
"""

from ptxtool.lint.registry import RULES, Hit, Rule, all_rules, rule
from ptxtool.lint.settings import LintSettings, load_settings

__all__ = [
    "RULES",
    "Hit",
    "Rule",
    "LintSettings",
    "all_rules",
    "load_settings",
    "rule",
]
