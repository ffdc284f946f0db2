"""The regret interval's coverage at the loop's seed counts, and paired against unpaired estimation.

A scripted agent with known success probabilities: each seed's no-hint win probability is drawn from
{0.02, 0.1, 0.5, 0.9, 0.98} and its hint lift from {0, 0.1, 0.3, 0.5} (capped at 1), so the lift varies by
seed and the population regret E_seed[p_hint - p_plain] is known exactly.

1. Coverage: at 2x2, 4x2, 8x2 and 16x4 (seeds x plays per arm), the share of repetitions whose 90%
   interval covers the population regret, for `estimate_regret`'s guarded t interval and for the
   percentile bootstrap it replaced; mean widths. Goals: coverage >= 0.85 at every size; at 16x4 the
   width at most 1.3x the bootstrap's.
2. Paired against unpaired (the reference's design: the arms play different seeds): the ratio of
   interval widths at equal plays (goal <= 0.7), and the plays each needs for a width of 0.2.
3. Where data is plentiful: 64 seeds whose hint adds exactly 0.3 to a continuous return (uniform on
   [0, 0.7]). The guard that keeps the interval honest at few seeds fades as seeds grow, so pairing
   wins here by far (goal: paired width at most 0.7 of unpaired; before the guard faded 0.288 against
   0.286), and the paired interval still covers 0.3.

About a minute.   python benchmarks/regret.py [--reps 1000]
"""
import argparse

import numpy as np

from spade_nb.regret import estimate_regret

LEVELS = np.array([0.02, 0.1, 0.5, 0.9, 0.98])
LIFTS = np.array([0.0, 0.1, 0.3, 0.5])
TRUE = float(np.mean([[min(lv + lf, 1) - lv for lf in LIFTS] for lv in LEVELS]))  # seeds draw level and lift uniformly


def arms(rng, seeds, plays, paired):
    "Returns of both arms: (hint, plain, groups), the hinted arm on its own seeds when unpaired."
    lv, lf = rng.choice(LEVELS, seeds), rng.choice(LIFTS, seeds)
    plain = (rng.random((seeds, plays)) < lv[:, None]).astype(float)
    if not paired: lv, lf = rng.choice(LEVELS, seeds), rng.choice(LIFTS, seeds)
    hint = (rng.random((seeds, plays)) < np.minimum(lv + lf, 1)[:, None]).astype(float)
    g = np.repeat(np.arange(seeds), plays)
    return hint.ravel(), plain.ravel(), g if paired else (g, g + seeds)


def study(seeds, plays, reps, paired, rng, method='t'):
    "(mean width, coverage of the population regret) over `reps` repetitions."
    ests = []
    for k in range(reps):
        h, p, g = arms(rng, seeds, plays, paired)
        ests.append(estimate_regret(h, p, paired=paired, groups=g, seed=k, level=0.9, n_boot=400, method=method))
    return float(np.mean([e.width for e in ests])), float(np.mean([e.lo <= TRUE <= e.hi for e in ests]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--reps', type=int, default=1000)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f'population regret {TRUE:.3f}; 90% intervals, {a.reps} repetitions per size')
    print(f'{"seeds x plays":>14} {"t coverage":>11} {"t width":>8} {"boot coverage":>14} {"boot width":>11} {"width ratio":>12}')
    ok = True
    for s, k in [(2, 2), (4, 2), (8, 2), (16, 4)]:
        wt, ct = study(s, k, a.reps, True, rng)
        wb, cb = study(s, k, a.reps, True, rng, method='bootstrap')
        ok &= ct >= 0.85
        print(f'{f"{s} x {k}":>14} {ct:>11.3f} {wt:>8.3f} {cb:>14.3f} {wb:>11.3f} {wt / wb:>12.2f}')
    print(f'coverage goal >= 0.85 at every size: {"met" if ok else "NOT met"}; '
          f'16 x 4 width ratio goal <= 1.3: {"met" if wt / wb <= 1.3 else "NOT met"} ({wt / wb:.2f})')
    S, K, R = 16, 4, 300
    wp, cp = study(S, K, R, True, rng)
    wu, cu = study(S, K, R, False, rng)
    print(f'\n{S} seeds x {K} plays per arm, {R} repetitions')
    print(f'paired   mean width {wp:.3f}  coverage {cp:.3f}')
    print(f'unpaired mean width {wu:.3f}  coverage {cu:.3f}')
    print(f'width ratio paired/unpaired {wp / wu:.2f}   (goal <= 0.7: {"met" if wp / wu <= 0.7 else "NOT met"})')
    for paired in (True, False):
        for s in range(4, 400, 4):
            w, _ = study(s, K, 40, paired, rng)
            if w <= 0.2: break
        print(f'{"paired" if paired else "unpaired":>8}: {s} seeds x {K} plays x 2 arms = {2 * s * K} plays for width <= 0.2 (width {w:.3f})')
    widths, cover = {True: [], False: []}, 0
    for k in range(200):
        plain = rng.random(64) * 0.7
        p, u = estimate_regret(plain + 0.3, plain), estimate_regret(plain + 0.3, rng.random(64) * 0.7, paired=False)
        widths[True].append(p.width); widths[False].append(u.width); cover += p.lo <= 0.3 <= p.hi
    wp, wu = np.mean(widths[True]), np.mean(widths[False])
    print(f'\n64 seeds, the hint adds exactly 0.3 to a continuous return, 200 repetitions')
    print(f'paired width {wp:.3f} (covers 0.3 in {cover / 200:.2f}), unpaired width {wu:.3f}, ratio {wp / wu:.2f} '
          f'(goal <= 0.7: {"met" if wp / wu <= 0.7 else "NOT met"}; before the guard faded: 0.288 against 0.286)')


if __name__ == '__main__':
    main()
