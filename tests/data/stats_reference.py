#!/usr/bin/python3
# Reference values for tests/stats_test.cpp, from numpy 1.24 / scipy 1.10.
# Run: /usr/bin/python3 tests/data/stats_reference.py  (prints what the test hard-codes)
import math
import numpy as np
import scipy.stats as st
from scipy.stats._mannwhitneyu import _mwu_state  # exact null distribution of U

np.set_printoptions(precision=17)

def show(name, value):
    print(f"{name} = {value!r}")

# ---- summarize: 25 samples, no warm-up removal --------------------------------------
x = [1.012, 0.998, 1.034, 1.001, 0.987, 1.105, 0.995, 1.020, 1.003, 0.991,
     1.450, 1.008, 0.999, 1.017, 0.982, 1.002, 1.011, 0.996, 1.026, 1.004,
     0.990, 1.009, 2.300, 1.000, 1.013]
a = np.array(x)
show("median", np.median(a))
show("mean", np.mean(a))
show("stddev", np.std(a, ddof=1))
show("mad", st.median_abs_deviation(a, scale=1.0))
show("p90", np.percentile(a, 90))
show("p99", np.percentile(a, 99))
q1, q3 = np.percentile(a, [25, 75])
iqr = q3 - q1
show("outliers", int(np.sum((a < q1 - 1.5 * iqr) | (a > q3 + 1.5 * iqr))))
# Median CI ranks: largest k with binom.cdf(k - 1, n, 0.5) <= 0.025
def rank(n, level):
    k = 0
    while k < n and st.binom.cdf(k, n, 0.5) <= (1 - level) / 2:
        k += 1
    return k
k = rank(len(a), 0.95)
s = np.sort(a)
show("ci_rank", k)
show("ci", (s[k - 1], s[len(a) - k]))
for n, level in [(6, 0.95), (20, 0.95), (20, 0.99), (100, 0.95), (1000, 0.95), (5, 0.95), (7, 0.99), (8, 0.99)]:
    show(f"rank n={n} level={level}", rank(n, level))
# normal approximation above 1000 (the implementation's rule)
for n in [1001, 5000, 100000]:
    z = st.norm.ppf(0.975)
    show(f"normal rank n={n}", math.floor(n / 2 + 0.5 - z * math.sqrt(n) / 2))

# ---- heavy ties -----------------------------------------------------------------------
t = np.array([5, 5, 5, 5, 5, 5, 6, 6, 6, 7, 5, 5, 9, 5, 6, 5, 5, 5, 5, 40], dtype=float)
show("ties median", np.median(t))
show("ties mad", st.median_abs_deviation(t, scale=1.0))
show("ties p90", np.percentile(t, 90))
show("ties p99", np.percentile(t, 99))
tq1, tq3 = np.percentile(t, [25, 75])
show("ties outliers", int(np.sum((t < tq1 - 1.5 * (tq3 - tq1)) | (t > tq3 + 1.5 * (tq3 - tq1)))))
show("ties stddev", np.std(t, ddof=1))

# ---- Mann-Whitney -----------------------------------------------------------------------
bx = [1.83, 1.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06]
by = [0.88, 0.65, 0.60, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29, 0.91]
r = st.mannwhitneyu(bx, [v + 0.001 * i for i, v in enumerate(by)], alternative='two-sided', method='exact')
show("mwu exact (8 vs 10, no ties) U, p", (r.statistic, r.pvalue))
by_untied = [v + 0.001 * i for i, v in enumerate(by)]
show("by_untied", by_untied)
r = st.mannwhitneyu([1, 2, 3], [4, 5, 6, 7], alternative='two-sided', method='exact')
show("mwu exact 3 vs 4 separated", (r.statistic, r.pvalue))
r = st.mannwhitneyu(bx, by, alternative='two-sided', method='asymptotic')
show("mwu asymptotic (8 vs 10, ties) U, p", (r.statistic, r.pvalue))
tx = [3, 4, 4, 5, 5, 5, 6, 6, 7, 8, 3, 4, 5, 5, 6]
ty = [4, 5, 5, 6, 6, 6, 7, 7, 8, 9, 5, 6, 6, 7, 7, 8, 6, 5, 7, 9]
r = st.mannwhitneyu(tx, ty, alternative='two-sided', method='asymptotic')
show("mwu asymptotic (15 vs 20 integers) U, p", (r.statistic, r.pvalue))
rng = np.random.default_rng(20261202)
lx = np.round(rng.lognormal(0, 0.2, 40), 6)
ly = np.round(rng.lognormal(0.05, 0.2, 30), 6)
r = st.mannwhitneyu(lx, ly, alternative='two-sided', method='asymptotic')
show("lx", list(lx))
show("ly", list(ly))
show("mwu asymptotic (40 vs 30, no ties) U, p", (r.statistic, r.pvalue))

# ---- Hodges-Lehmann interval of the ratio, brute force --------------------------------
def hl_ratio_ci(base, cand, level, exact):
    base = np.sort(np.asarray(base, float)); cand = np.sort(np.asarray(cand, float))
    n1, n2 = len(base), len(cand)
    d = np.sort((np.log(cand)[None, :] - np.log(base)[:, None]).ravel())
    tail = (1 - level) / 2
    if exact:
        k = 0
        while k < n1 * n2 and _mwu_state.cdf(k, n1, n2) <= tail:
            k += 1
    else:
        allv = np.concatenate([base, cand])
        _, counts = np.unique(allv, return_counts=True)
        tie = float(np.sum(counts ** 3 - counts))
        n = n1 + n2
        sd = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie / (n * (n - 1))))
        k = math.floor(n1 * n2 / 2 + 0.5 - st.norm.ppf(1 - tail) * sd)
    return k, math.exp(d[k - 1]), math.exp(d[n1 * n2 - k])
show("hl exact 8 vs 10", hl_ratio_ci(bx, by_untied, 0.95, True))
show("hl asymptotic 40 vs 30", hl_ratio_ci(lx, ly, 0.95, False))
show("hl asymptotic 15 vs 20 ties", hl_ratio_ci(tx, ty, 0.95, False))
show("median ratio 40 vs 30", np.median(ly) / np.median(lx))
