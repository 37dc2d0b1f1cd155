#!/usr/bin/env python3
"""Whether a test-backend-ops case ours failed is a flake of the case or a
fault of ours, from its reruns alone on each side.

test-backend-ops draws new random inputs in every process, and a case whose
error sits near its threshold (a near tie in a top-k selection, an f16 sum
just over 1e-7) fails now and then on NVIDIA's stack too. Both stacks run
the same kernels on inputs from the same distribution, so on a correct
runtime the two sides fail such a case at the same rate. A case is
*borderline* when stock failed it at least once, ours passed it at least
once, and ours did not fail it significantly more often than stock (a
one-sided Fisher exact test, p >= ALPHA). Anything else is ours to fix.

    flake.py STOCK_FAILS OURS_FAILS RUNS     prints borderline or ours (with the p-value)
"""
import sys
from math import comb

ALPHA = 0.01


def p_ours_fails_more(stock_fails: int, ours_fails: int, runs: int) -> float:
    """P(ours fails at least ours_fails times of the stacks' combined
    failures, were both sides equally likely to fail): the hypergeometric
    tail of the two-by-two table with RUNS runs a side."""
    fails = stock_fails + ours_fails
    total = comb(2 * runs, fails)
    tail = sum(comb(runs, x) * comb(runs, fails - x) for x in range(ours_fails, min(fails, runs) + 1))
    return tail / total


def verdict(stock_fails: int, ours_fails: int, runs: int) -> tuple[str, float]:
    p = p_ours_fails_more(stock_fails, ours_fails, runs)
    border = stock_fails > 0 and ours_fails < runs and p >= ALPHA
    return ("borderline" if border else "ours"), p


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    try:
        s, o, k = (int(a) for a in sys.argv[1:])
    except ValueError:
        print("flake.py: the three counts must be integers", file=sys.stderr)
        return 2
    if k <= 0 or not (0 <= s <= k and 0 <= o <= k):
        print(f"flake.py: counts out of range: stock {s}, ours {o}, runs {k}", file=sys.stderr)
        return 2
    word, p = verdict(s, o, k)
    print(f"{word} {p:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
