"""The main job, stage by stage: `spade selfplay`'s start and one tiny-cpu iteration, each stage's seconds, the tokens it
generated (and the prompt tokens it read), its generate calls, the sandbox workers it started and the calls it sent
them, beside its share of the main job's budget.

    python benchmarks/selfplay.py                           # tiny-cpu's iteration 0 (about 4 minutes on 2 cores)
    python benchmarks/selfplay.py --iteration 1             # iteration 0, then the timed iteration 1 (no base-model eval)
    python benchmarks/selfplay.py --set selfplay.designs_per_iteration=2    # any config key
    python benchmarks/selfplay.py --profile prof.out        # cProfile of each stage; the slowest one's written and printed

The budget is the README's: the first command, install included, within 15 minutes (900 s) on 2 CPU cores. The
install's share is measured separately (`--install-seconds`, default the README's figure), the rest is split between
the start and the preset's iterations: each iteration's stages are shown as a share of (900 - install - start) /
iterations. Tokens and calls are counted in this process (admission's worker threads included); the profile covers
the main thread only.
"""
import argparse
import contextlib
import cProfile
import io
import pstats
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

BUDGET = 900.0  # seconds: the README's first command, install included (issue 37)
INSTALL = 180.0  # seconds: an install from PyPI on 2 cores (README, "How long"; pass --install-seconds for yours)


class Counts:
    "Per-stage counters, filled from hooks on the policy and the sandbox workers."
    def __init__(self):
        self.stage, self.lock = 'start', threading.Lock()
        self.tokens, self.prompt_tokens, self.calls = Counter(), Counter(), Counter()
        self.workers, self.sandbox, self.seconds = Counter(), defaultdict(Counter), {}

    def add(self, what: Counter, n: int = 1):
        with self.lock: what[self.stage] += n


def hook_sandbox(counts: Counts):
    "Count every worker started and every call sent to one, by the stage running."
    from spade_nb import sandbox
    init, call = sandbox._Worker.__init__, sandbox._Worker.call

    def counted_init(self, *a, **kw):
        counts.add(counts.workers)
        return init(self, *a, **kw)

    def counted_call(self, op, *a, **kw):
        with counts.lock: counts.sandbox[counts.stage][op] += 1
        return call(self, op, *a, **kw)
    sandbox._Worker.__init__, sandbox._Worker.call = counted_init, counted_call


def hook_policy(policy, counts: Counts):
    "Count generated and prompt tokens of every generate call."
    generate = policy.generate

    def counted(prompts, *a, **kw):
        out = generate(prompts, *a, **kw)
        counts.add(counts.calls)
        counts.add(counts.prompt_tokens, sum(len(p) for p in prompts))
        counts.add(counts.tokens, sum(len(c.token_ids) for cs in out for c in cs))
        return out
    policy.generate = counted


def hook_stages(counts: Counts, profiles: dict | None):
    "Name the stage running (the base model's evaluation apart from the evaluation after the update); profile each."
    from spade_nb import selfplay
    enter = selfplay.StageClock.__call__

    @contextlib.contextmanager
    def staged(self, name, note=''):
        label = 'eval (base model)' if name == 'eval' and 'base model' in note else name
        counts.stage = label
        prof = profiles.setdefault(label, cProfile.Profile()) if profiles is not None else None
        with enter(self, name, note):
            t = time.perf_counter()
            if prof: prof.enable()
            try: yield
            finally:
                if prof: prof.disable()
                counts.seconds[label] = counts.seconds.get(label, 0.0) + time.perf_counter() - t
                counts.stage = 'other'  # scoring, rewards and transcripts between stages
    selfplay.StageClock.__call__ = staged


def table(timed: dict, counts: Counts, per_iteration: float, start: float, start_budget: float) -> list[str]:
    "The stage table's lines."
    head = f"{'stage':<18}{'seconds':>9}{'of budget':>11}{'tokens':>9}{'prompt tok':>12}{'generates':>10}{'workers':>9}  sandbox calls"
    lines = [head, '-' * len(head)]
    def row(name, secs, budget):
        calls = ', '.join(f'{op} {n}' for op, n in sorted(counts.sandbox[name].items())) or '-'
        lines.append(f'{name:<18}{secs:>9.1f}{secs / budget:>10.0%} {counts.tokens[name]:>9}{counts.prompt_tokens[name]:>12}'
                     f'{counts.calls[name]:>10}{counts.workers[name]:>9}  {calls}')
    row('start', start, start_budget)
    for name, secs in timed.items(): row(name, secs, per_iteration)
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--preset', default='tiny-cpu')
    ap.add_argument('--set', dest='overrides', action='append', default=[], metavar='KEY=VALUE')
    ap.add_argument('--iteration', type=int, default=0, help='the iteration timed (earlier ones run first, untimed)')
    ap.add_argument('--install-seconds', type=float, default=INSTALL)
    ap.add_argument('--profile', metavar='FILE', help="write the slowest stage's cProfile stats here (pstats format)")
    args = ap.parse_args(argv)

    from spade_nb.selfplay import SelfPlay, load_config
    cfg = load_config(args.preset, overrides=args.overrides)
    iterations = cfg.selfplay.iterations
    counts, profiles = Counts(), ({} if args.profile else None)
    hook_sandbox(counts)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        sp = SelfPlay.start(cfg, Path(tmp)/'run', log=lambda *a: None, progress=False)
        start = time.perf_counter() - t0
        hook_policy(sp.policy, counts)
        counts.stage = 'untimed'  # earlier iterations' work is kept out of the start's row and the table
        for it in range(args.iteration):  # untimed iterations before the one timed
            sp.iteration(it); sp.next_iteration = it + 1
        hook_stages(counts, profiles)
        counts.stage = 'other'
        t1 = time.perf_counter()
        row = sp.iteration(args.iteration)
        total = time.perf_counter() - t1

    stage_secs = {**counts.seconds, 'other': total - sum(counts.seconds.values())}
    per_iteration = (BUDGET - args.install_seconds - start) / iterations
    print(f'{args.preset}: iteration {args.iteration} of {iterations}, {cfg.llm.model} on {cfg.llm.backend}; '
          f'{total:.0f} s (the loop says {row["seconds"]:.0f} s)')
    print(f'budget: {BUDGET:.0f} s for the README command = install {args.install_seconds:.0f} s + start {start:.0f} s + '
          f'{iterations} iterations of {per_iteration:.0f} s; stages below as a share of one iteration '
          f'(start: of the {BUDGET - args.install_seconds:.0f} s after the install)\n')
    print('\n'.join(table(stage_secs, counts, per_iteration, start, BUDGET - args.install_seconds)))
    ratio = total / per_iteration
    print(f"\niteration {args.iteration}: {total:.0f} s of its {per_iteration:.0f} s budget, ratio {ratio:.2f} "
          f"(goal <= 1.00): {'met' if ratio <= 1 else 'NOT met'}")
    if profiles:
        slowest = max((n for n in stage_secs if n in profiles), key=stage_secs.get)
        profiles[slowest].dump_stats(args.profile)
        out = io.StringIO()
        pstats.Stats(profiles[slowest], stream=out).sort_stats('cumulative').print_stats(30)
        print(f'\nprofile of the slowest stage, {slowest} ({stage_secs[slowest]:.0f} s), written to {args.profile}:')
        print(out.getvalue()[:6000])
    return 0


if __name__ == '__main__':
    sys.exit(main())
