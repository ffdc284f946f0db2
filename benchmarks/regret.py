"""Paired against unpaired regret estimation, with a scripted agent whose success probabilities are known.

Seeds differ widely in difficulty (no-hint win probability drawn from {0.02, 0.1, 0.5, 0.9, 0.98}); the
hint adds 0.3 (capped at 1), so the true regret of the seed population is known exactly. Paired: both
arms play the same S seeds, K plays each. Unpaired (the reference's design): the arms play different
seeds, with the same number of plays, each arm bootstrapped by its own seeds. Reported: the ratio of interval widths at equal plays (goal <= 0.7),
the coverage of the true regret over many repetitions (nominal 0.9), and the plays each needs to reach
an interval width of 0.2. Finishes in well under a minute.   python benchmarks/regret.py
"""
import numpy as np

from spade_nb.regret import estimate_regret

LEVELS = np.array([0.02, 0.1, 0.5, 0.9, 0.98])
LIFT = 0.3
TRUE = float(np.mean(np.minimum(LEVELS + LIFT, 1) - LEVELS))  # seeds are drawn uniformly over LEVELS


def trial(rng, seeds, plays, paired, seed):
    p_a = rng.choice(LEVELS, seeds)
    p_b = p_a if paired else rng.choice(LEVELS, seeds)  # unpaired: the hinted arm sees other instances
    plain = (rng.random((seeds, plays)) < p_a[:, None]).astype(float)
    hint = (rng.random((seeds, plays)) < np.minimum(p_b + LIFT, 1)[:, None]).astype(float)
    groups = np.repeat(np.arange(seeds), plays)
    return estimate_regret(hint.ravel(), plain.ravel(), paired=paired, groups=groups if paired else (groups, groups + seeds),
                           seed=seed, level=0.9, n_boot=400)


def study(seeds, plays, reps, paired, rng):
    ests = [trial(rng, seeds, plays, paired, k) for k in range(reps)]
    return float(np.mean([e.width for e in ests])), float(np.mean([e.lo <= TRUE <= e.hi for e in ests]))


def main():
    rng = np.random.default_rng(0)
    S, K, R = 16, 4, 300
    wp, cp = study(S, K, R, True, rng)
    wu, cu = study(S, K, R, False, rng)
    print(f'true regret {TRUE:.3f}; {S} seeds x {K} plays per arm, {R} repetitions, 90% intervals')
    print(f'paired   mean width {wp:.3f}  coverage {cp:.3f}')
    print(f'unpaired mean width {wu:.3f}  coverage {cu:.3f}')
    print(f'width ratio paired/unpaired {wp / wu:.2f}   (goal <= 0.7: {"met" if wp / wu <= 0.7 else "NOT met"}); '
          f'coverage goal: close to 0.90')
    for paired in (True, False):
        for s in range(4, 400, 4):
            w, _ = study(s, K, 60, paired, rng)
            if w <= 0.2: break
        print(f'{"paired" if paired else "unpaired":>8}: {s} seeds x {K} plays x 2 arms = {2 * s * K} plays for width <= 0.2 (width {w:.3f})')


if __name__ == '__main__':
    main()
