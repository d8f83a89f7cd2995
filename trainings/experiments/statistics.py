"""Intervals for answer rates and for the difference of two of them. Pure.

Wilson's score interval for one rate (good near 0 and 1 and for small samples, unlike p ± z·se), and
Newcombe's hybrid score interval for a difference of two independent rates, built from the two Wilson
intervals (Newcombe 1998, method 10). A difference is called significant at a confidence when its interval
leaves out zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist


def z_for(confidence: float) -> float:
    """The two-sided normal quantile: 1.96 for 0.95."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(successes: int, n: int, confidence: float) -> tuple[float, float]:
    """Wilson's interval for successes out of n; (0, 1) when there is no sample."""
    if n <= 0:
        return 0.0, 1.0
    z, p = z_for(confidence), successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Difference:
    """The rate of b minus the rate of a, with its interval, and whether that interval leaves out zero."""

    estimate: float
    low: float
    high: float

    @property
    def significant(self) -> bool:
        return self.low > 0 or self.high < 0


def rate_difference(a: tuple[int, int], b: tuple[int, int], confidence: float) -> Difference | None:
    """Newcombe's interval for rate(b) - rate(a), each given as (successes, n); None when one has no
    sample."""
    (xa, na), (xb, nb) = a, b
    if na <= 0 or nb <= 0:
        return None
    pa, pb = xa / na, xb / nb
    la, ua = wilson(xa, na, confidence)
    lb, ub = wilson(xb, nb, confidence)
    d = pb - pa
    low = d - math.sqrt((pb - lb) ** 2 + (ua - pa) ** 2)
    high = d + math.sqrt((ub - pb) ** 2 + (pa - la) ** 2)
    return Difference(d, low, high)
