"""Statistics for timings that decide something: the median of paired ratios with a distribution-free confidence
interval (order statistics of the binomial), so that "B is faster than A" is said only when the data bear it out.

Launch times are skewed and have outliers (clock changes, another process), so no normal model: the interval for a
median is [x_(k), x_(n-k+1)] of the sorted sample, with k the largest index such that P(Binomial(n, 1/2) < k) is at
most (1 - confidence) / 2; it holds for any continuous distribution. Ratios are paired (candidate and reference
launched in the same round), so slow drift of the GPU's clocks cancels.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Interval:
    """A median and its confidence interval; `low`/`high` are None when the sample is too small for one."""

    median: float
    low: float | None
    high: float | None
    confidence: float
    samples: int

    @property
    def below(self) -> bool:
        """Entirely below 1: faster (or smaller) beyond the noise at this confidence."""
        return self.high is not None and self.high < 1.0

    @property
    def above(self) -> bool:
        """Entirely above 1: slower beyond the noise."""
        return self.low is not None and self.low > 1.0

    def to_data(self) -> dict:
        return {
            "median": self.median,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "samples": self.samples,
        }


def _log_binomial_half(n: int, i: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2)


def order_statistic_rank(n: int, confidence: float) -> int | None:
    """The 1-based rank k of the interval's lower end for a sample of n (the upper end is n + 1 - k), or None when
    n is too small for any interval at this confidence (n = 5 allows 93.75 % at most)."""
    tail = (1.0 - confidence) / 2
    cumulative, k = 0.0, 0
    for i in range(n // 2 + 1):
        cumulative += math.exp(_log_binomial_half(n, i))
        if cumulative > tail:
            break
        k = i + 1
    return k if k >= 1 else None


def median_interval(values: Sequence[float], confidence: float) -> Interval:
    """The median of `values` and its order-statistics confidence interval."""
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        return Interval(math.nan, None, None, confidence, 0)
    k = order_statistic_rank(n, confidence)
    middle = statistics.median(ordered)
    if k is None:
        return Interval(middle, None, None, confidence, n)
    return Interval(middle, ordered[k - 1], ordered[n - k], confidence, n)


def paired_ratios(candidate: Sequence[float], reference: Sequence[float]) -> list[float]:
    """Candidate over reference, round by round (a candidate timed in fewer rounds pairs with the first ones)."""
    return [c / r for c, r in zip(candidate, reference, strict=False) if r > 0]


def corrected(confidence: float, comparisons: int) -> float:
    """Bonferroni: the confidence each of several comparisons needs so that all hold together at `confidence`
    (choosing the best of many candidates is many comparisons: one would look faster by chance)."""
    return 1.0 - (1.0 - confidence) / max(comparisons, 1)
