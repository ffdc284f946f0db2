"""Torch's CPU threads for generation and training, quiet and beside a busy process, in one run.

The loop generates and trains in one process while other work runs beside it: sandbox workers stepping environments,
admission, another job on a shared laptop. On a 2-core machine a busy neighbour made generation with torch's default
two threads about ten times slower than with one (FACTS, threads). This measures, in fresh processes (OpenMP reads
its settings when torch loads), tokens per second of the embedded model generating a batch and samples per second of
one trainer step, for each thread count 1..cores, with OpenMP's default and its passive wait policy, on a quiet machine
beside one process that keeps a core busy, and beside as many as there are cores. Goal: the package's choice (`spade_nb.llm.cpu_threads()` with
`OMP_WAIT_POLICY=PASSIVE`, what `spade` sets) at 0.8 of the best setting or more when loaded and at 0.65 or more when
quiet (a core of two left free could cost up to half of the quiet speed). One measurement a setting: run to run, a
figure moves by about 10%. About three minutes on 2 cores.

    python benchmarks/threads.py [--batch 8] [--new-tokens 48] [--threads 1 2] [--loads 0 1 2]
"""
import argparse
import json
import os
import subprocess
import sys
import time


def child(args):
    "One setting: generation tokens/s and a trainer step's samples/s, printed as JSON."
    import torch
    from spade_nb.core import Sample
    from spade_nb.llm import SamplingParams
    from spade_nb.policy import load_policy
    from spade_nb.trainer import Trainer, TrainerConfig
    torch.set_num_threads(args.child)
    pol = load_policy()
    prompts = [pol.chat_ids([{'role': 'user', 'content': f'Count from {i} to {i + 30}, one number a line.'}])
               for i in range(args.batch)]
    sp = SamplingParams(n=1, max_new_tokens=args.new_tokens, temperature=1.0, seed=0)
    pol.generate(prompts[:2], SamplingParams(n=1, max_new_tokens=4, seed=0))  # warm
    t = time.perf_counter()
    outs = pol.generate(prompts, sp)
    gen_s = time.perf_counter() - t
    tokens = sum(len(c.token_ids) for o in outs for c in o)
    tr = Trainer(pol, TrainerConfig(lr=1e-4))
    batch = [Sample(p + c.token_ids, [0] * len(p) + [1] * len(c.token_ids), [0.0] * len(p) + c.logprobs, 'agent',
                    float(i % 2), 'g') for i, (p, o) in enumerate(zip(prompts, outs)) for c in o]
    t = time.perf_counter()
    tr.train_step(batch)
    train_s = time.perf_counter() - t
    print(json.dumps({'tokens_per_s': tokens / gen_s, 'samples_per_s': len(batch) / train_s}))


def run(threads: int, passive: bool, busy: bool, args) -> dict:
    env = {**os.environ, 'OMP_NUM_THREADS': str(threads)}
    env.pop('OMP_WAIT_POLICY', None)
    if passive: env['OMP_WAIT_POLICY'] = 'PASSIVE'
    hogs = [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _ in range(busy)]
    try:
        p = subprocess.run([sys.executable, __file__, '--child', str(threads), '--batch', str(args.batch),
                            '--new-tokens', str(args.new_tokens)], env=env, capture_output=True, text=True, timeout=900)
    finally:
        for h in hogs: h.kill(); h.wait()
    if p.returncode: raise SystemExit(p.stdout[-2000:] + p.stderr[-2000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--child', type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument('--batch', type=int, default=8)
    ap.add_argument('--new-tokens', type=int, default=48)
    ap.add_argument('--threads', type=int, nargs='*', default=None, help='thread counts to try (default 1..cores)')
    ap.add_argument('--loads', type=int, nargs='*', default=None,
                    help='busy neighbours to try (default: 0, 1 and one per core)')
    args = ap.parse_args()
    if args.child is not None: return child(args)
    from spade_nb.llm import cpu_threads
    cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    counts = sorted(set(args.threads or range(1, cores + 1)) | {cpu_threads()})
    print(f'{cores} cores; the package chooses {cpu_threads()} thread(s) with OMP_WAIT_POLICY=PASSIVE')
    print(f"{'neighbour':<10} {'threads':>7} {'wait':>8} {'gen tok/s':>10} {'train samples/s':>16}")
    res = {}
    names = {0: 'quiet', 1: 'one busy', cores: 'all busy'}
    loads = {k: names.get(k, f'{k} busy') for k in (args.loads if args.loads is not None else names)}
    for busy in loads:
        for n in counts:
            for passive in (False, True):
                r = res[busy, n, passive] = run(n, passive, busy, args)
                print(f"{loads[busy]:<10} {n:>7} {'passive' if passive else 'default':>8} "
                      f"{r['tokens_per_s']:>10.1f} {r['samples_per_s']:>16.2f}", flush=True)
    for busy, goal in ((k, 0.65 if k == 0 else 0.8) for k in loads):
        for key in ('tokens_per_s', 'samples_per_s'):
            best = max(r[key] for (b, *_), r in res.items() if b == busy)
            ours = res[busy, cpu_threads(), True][key] / best
            print(f"{loads[busy]} {key}: the package's choice at {ours:.2f} of the best "
                  f"(goal >= {goal}): {'met' if ours >= goal else 'NOT met'}")


if __name__ == '__main__':
    main()
