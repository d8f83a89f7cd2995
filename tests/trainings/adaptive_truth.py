"""An independent computation of what trainings/experiments/bandit.py reports, for its tests: numerical
integration of the Beta posteriors on a grid (no sampling), in plain Python (scipy is not installed).

P(arm i is best) = integral of f_i(x) * prod_{j != i} F_j(x) dx, and the leader's chance that no arm
beats it by more than m = integral of f_L(x) * prod_{j != L} F_j(x + m) dx, with f the Beta density and F
its distribution function (cumulative trapezoid on the same grid). The grid step, 1/4000, puts x + m on
the grid for m = 0.01; the integration error is far below the Monte Carlo error it is compared with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

STEPS = 4000


def _density(alpha: int, beta: int) -> list[float]:
    log_norm = math.lgamma(alpha + beta) - math.lgamma(alpha) - math.lgamma(beta)
    out = []
    for k in range(STEPS + 1):
        x = k / STEPS
        if (x == 0 and alpha > 1) or (x == 1 and beta > 1):
            out.append(0.0)
            continue
        if x in (0, 1):  # alpha or beta is 1 there: the density's edge value
            out.append(math.exp(log_norm))
            continue
        out.append(math.exp(log_norm + (alpha - 1) * math.log(x) + (beta - 1) * math.log(1 - x)))
    return out


def _cumulative(density: list[float]) -> list[float]:
    out, total, h = [0.0], 0.0, 1 / STEPS
    for k in range(1, len(density)):
        total += h * (density[k - 1] + density[k]) / 2
        out.append(total)
    return [min(1.0, v / total) for v in out]  # normalised: the grid's own total is 1 up to its error


def _integral(values: Sequence[float]) -> float:
    h = 1 / STEPS
    return h * (sum(values) - (values[0] + values[-1]) / 2)


def truth(in_time: Sequence[int], asked: Sequence[int], margin: float = 0.01) -> tuple[list[float], float]:
    """(P(best) per arm, P(no arm beats the one most often best by more than `margin`))."""
    params = [(1 + x, 1 + n - x) for x, n in zip(in_time, asked, strict=True)]
    densities = [_density(a, b) for a, b in params]
    totals = [_integral(d) for d in densities]
    densities = [[v / t for v in d] for d, t in zip(densities, totals, strict=True)]
    cdfs = [_cumulative(d) for d in densities]
    arms = range(len(params))
    best = []
    for i in arms:
        values = [densities[i][k] * math.prod(cdfs[j][k] for j in arms if j != i) for k in range(STEPS + 1)]
        best.append(_integral(values))
    leader = max(arms, key=lambda arm: best[arm])
    shift = round(margin * STEPS)
    values = [
        densities[leader][k] * math.prod(cdfs[j][min(k + shift, STEPS)] for j in arms if j != leader)
        for k in range(STEPS + 1)
    ]
    return best, _integral(values)
