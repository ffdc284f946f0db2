"""Does the main job make the embedded model better? A recorded-run check, not a benchmark (about 11 minutes a run on
2 cores): it runs a preset's `spade selfplay` (default tiny-cpu) in this process and prints the held-out win rate of
the base model and after the last iteration, with their 90% Wilson intervals and what each held-out dataset did.

    python scripts/learning_check.py [--seed 0] [--flip] [--preset tiny-cpu] [--run-dir DIR] [--set key=value ...]

Goal: the final interval lies above the origin's. `--flip` is the mutation check: every advantage's sign flipped (the
trainer's `compute_advantages` wrapped here, nothing in the package changes), so the update pushes away from what won;
its goal is the opposite: no rise (the final rate within or below the origin's interval).
"""
import argparse
import tempfile
import time
from pathlib import Path


def flip_advantages():
    "Wrap the trainer's advantages so each comes out negated: the learning signal reversed."
    import spade_nb.trainer as tr
    original = tr.compute_advantages

    def flipped(samples, **kw):
        out, stats = original(samples, **kw)
        for s in out: s.advantage = -s.advantage
        return out, stats
    tr.compute_advantages = flipped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--preset', default='tiny-cpu')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--flip', action='store_true', help='the mutation check: advantages negated')
    ap.add_argument('--run-dir', default=None, help='where the run goes (default: a temporary folder)')
    ap.add_argument('--set', action='append', default=[], metavar='KEY=VALUE')
    args = ap.parse_args()
    from spade_nb.selfplay import SelfPlay, load_config
    cfg = load_config(args.preset, overrides=[f'seed={args.seed}', *args.set])
    if args.flip: flip_advantages()
    run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix='learning-check-'))/'run'
    t = time.time()
    rows = SelfPlay.start(cfg, run_dir).run()
    first, last = rows[0], rows[-1]
    o, f = (first['win_rate_heldout_origin'], first['heldout_origin_lo'], first['heldout_origin_hi']), \
        (last['win_rate_heldout'], last['heldout_lo'], last['heldout_hi'])
    print(f'\n{args.preset}, seed {args.seed}{", advantages flipped" if args.flip else ""}: '
          f'{len(rows)} iterations in {time.time() - t:.0f} s ({run_dir})')
    print(f'held-out win rate, base model: {o[0]:.3f} [{o[1]:.3f}, {o[2]:.3f}] '
          f'({first["heldout_episodes"]} episodes)')
    for r in rows:
        if r['win_rate_heldout'] is not None:
            print(f"  after iteration {r['iteration']}: {r['win_rate_heldout']:.3f} "
                  f"[{r['heldout_lo']:.3f}, {r['heldout_hi']:.3f}]  by dataset {r['win_rate_heldout_by_env']}")
    print(f"  base model by dataset {first.get('win_rate_heldout_origin_by_env')}")
    rises = f[1] > o[2]
    if args.flip:
        ok = f[0] <= o[2]
        print(f'goal (flipped): no rise, the final rate {f[0]:.3f} <= the origin\'s upper end {o[2]:.3f}: '
              f'{"met" if ok else "NOT met"}')
    else:
        print(f'goal: the final interval above the origin\'s, {f[1]:.3f} > {o[2]:.3f}: {"met" if rises else "NOT met"}')


if __name__ == '__main__':
    main()
