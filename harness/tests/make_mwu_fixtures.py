#!/usr/bin/env python3
"""Generates fixtures/mwu_scipy.json: Mann-Whitney U cases with SciPy's answers.

Run ONCE by hand (needs numpy + scipy, which the tests do not need); the output is committed and
statistics_test.cpp checks tc::stats::mann_whitney_u against it (|dU|, |dp| <= 1e-6):

    python3 harness/tests/make_mwu_fixtures.py > harness/tests/fixtures/mwu_scipy.json
"""
import json
import sys

import numpy as np
import scipy
from scipy.stats import mannwhitneyu
from scipy.stats._mannwhitneyu import _mwu_choose_method

rng = np.random.default_rng(20261129)


def r(a):
    return [float(v) for v in a]


cases = []


def add(name, x, y):
    x, y = r(x), r(y)
    res = mannwhitneyu(x, y, alternative="two-sided")
    ties = len(set(x + y)) < len(x) + len(y)
    cases.append({"name": name, "x": x, "y": y, "u": float(res.statistic), "p": float(res.pvalue),
                  "method": _mwu_choose_method(len(x), len(y), ties)})


add("tiny_1v1", [1.0], [2.0])
add("tiny_2v2_separated", [1.0, 2.0], [3.0, 4.0])
add("tiny_3v3_separated", [1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
add("small_4v4_separated", [1, 2, 3, 4], [5, 6, 7, 8])
add("small_5v5_separated", rng.normal(10, 0.1, 5), rng.normal(11, 0.1, 5))
add("small_5v5_overlap", rng.normal(10, 1, 5), rng.normal(10.5, 1, 5))
add("small_3v7", rng.normal(0, 1, 3), rng.normal(1, 1, 7))
add("small_8v8_shifted", rng.normal(0, 1, 8), rng.normal(1.5, 1, 8))
add("small_8v8_same_dist", rng.normal(0, 1, 8), rng.normal(0, 1, 8))
add("exact_2v20", rng.normal(0, 1, 2), rng.normal(0.5, 1, 20))
add("exact_8v30", rng.normal(0, 1, 8), rng.normal(0.8, 1, 30))
add("boundary_9v9", rng.normal(0, 1, 9), rng.normal(1, 1, 9))
add("boundary_8v9", rng.normal(0, 1, 8), rng.normal(1, 1, 9))
add("large_30v30_shifted", rng.normal(0, 1, 30), rng.normal(0.7, 1, 30))
add("large_50v40_same", rng.normal(5, 2, 50), rng.normal(5, 2, 40))
add("large_100v100_small_shift", rng.normal(0, 1, 100), rng.normal(0.2, 1, 100))
add("ties_small_5v5", [1, 2, 2, 3, 4], [2, 3, 3, 5, 6])
add("ties_integers_20v20", rng.integers(0, 5, 20), rng.integers(1, 6, 20))
add("ties_across_12v10", rng.integers(0, 3, 12), rng.integers(0, 3, 10))
add("identical_5v5", [3.0] * 5, [3.0] * 5)
add("identical_samples_same_values", [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0])
add("constant_vs_constant_different", [1.0] * 6, [2.0] * 6)
add("timings_ms_5v5_slowed", rng.normal(12.0, 0.3, 5), rng.normal(17.0, 0.3, 5))
add("timings_ms_9v9_noise", rng.normal(12.0, 0.3, 9), rng.normal(12.05, 0.3, 9))
add("reversed_order_y_smaller", rng.normal(2, 0.5, 6), rng.normal(0, 0.5, 6))
add("exact_8v200_unbalanced", rng.normal(0, 1, 8), rng.normal(0.3, 1, 200))
add("exact_3v1000_unbalanced", rng.normal(0, 1, 3), rng.normal(0.3, 1, 1000))

json.dump({"generator": "harness/tests/make_mwu_fixtures.py", "scipy": scipy.__version__,
           "numpy": np.__version__, "call": "scipy.stats.mannwhitneyu(x, y, alternative='two-sided')",
           "cases": cases}, sys.stdout, indent=1)
sys.stdout.write("\n")
