"""What a designer writes: designs from the loop's own designer prompt on the embedded corpus (scratch and edit mode),
each through real admission; for the admitted ones the hint, a few plays per arm and the measured regret.

The loop's own stages do the work (`write_designs`, `admit_designs`, `hint_stage`, `play_stage`, `score_stage`), in
rounds of `--batch` designs, so a long probe saves what it has after every round. Printed: the admitted share with
its 90% Wilson interval, a table of rejection reasons, tokens and seconds per design, and per admitted environment
its hint, win rates and regret. Saved to `--out`: every design (prompt, reply, code, verdict, reward) in
designs.jsonl, the admitted environments with their scores in admitted.jsonl, their episodes in episodes.jsonl.

Default: the embedded model, 4 designs of at most 256 tokens (a few minutes on 2 CPU cores; a 135M model admits
nothing, so the figures show the mechanics). The 1.5B coder (spade_nb.offline; about 35 minutes on 2 cores in bf16):
    python benchmarks/designer_probe.py --model Qwen/Qwen2.5-Coder-1.5B-Instruct --designs 16 --max-new-tokens 1536 \
        --max-context 6144 --dtype bfloat16
(measured on 2 cores, 2026-12-01: 125 s a design in rounds of 4, bf16; README, "What a 1.5B coder does on a laptop").
"""
import argparse
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from spade_nb.core import Seeds
from spade_nb.heldout import wilson
from spade_nb.selfplay import _jsonl_append as _append  # the run directory's own JSONL writer
from spade_nb.selfplay import RunDir, admit_designs, episode_rows, hint_stage, load_config, open_run, play_stage, reward_stage, score_stage, write_designs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--model', default='embedded', help="'embedded', a local folder or a hub id (an offline copy when installed)")
    ap.add_argument('--designs', type=int, default=4)
    ap.add_argument('--batch', type=int, default=4, help='designs generated at once (one round)')
    ap.add_argument('--max-new-tokens', type=int, default=256)
    ap.add_argument('--max-context', type=int, default=4096)
    ap.add_argument('--dtype', default='auto', help="llm.dtype: 'auto' (fp32 on a CPU), 'bfloat16' (faster on CPUs with AVX512-BF16); the probe runs on the CPU")
    ap.add_argument('--temperature', type=float, default=0.7)
    ap.add_argument('--edit-share', type=float, default=0.5, help='share of designs asked to edit an environment of the memory')
    ap.add_argument('--repair-turns', type=int, default=0)
    ap.add_argument('--seeds', type=int, default=2, help='seeds played per admitted environment')
    ap.add_argument('--plays', type=int, default=2, help='plays per seed and arm')
    ap.add_argument('--max-turns', type=int, default=8, help="rollout.max_turns (an episode's cap, whatever the environment's own)")
    ap.add_argument('--turn-tokens', type=int, default=96, help='rollout.max_new_tokens (per turn)')
    ap.add_argument('--out', default='designer-probe', help='folder for the transcripts (must not hold a probe already)')
    ap.add_argument('--seed', type=int, default=0)
    a = ap.parse_args()
    out = Path(a.out)
    if (out/'designs.jsonl').exists(): raise SystemExit(f'{out} already holds a probe; choose another --out')
    cfg = load_config('tiny-cpu', overrides=[
        f'llm.model={a.model}', f'llm.dtype={a.dtype}', 'llm.device=cpu', f'llm.max_context={a.max_context}', f'llm.batch_size={a.batch}', f'seed={a.seed}',
        f'selfplay.designs_per_iteration={a.batch}', f'selfplay.seeds_per_env={a.seeds}', f'selfplay.plays={a.plays}', 'selfplay.heldout=[]',
        f'designer.max_new_tokens={a.max_new_tokens}', f'designer.temperature={a.temperature}', f'designer.edit_share={a.edit_share}',
        f'designer.repair_turns={a.repair_turns}', 'designer.skills=[reasoning_game,tool_use]',
        f'rollout.max_turns={a.max_turns}', f'rollout.max_new_tokens={a.turn_tokens}',
        *(['reward.seed_test=false'] if a.plays < 2 else [])])  # one play a seed: too few for the seed test
    t0 = time.perf_counter()
    parts = open_run(cfg, RunDir(out), fresh=True)
    print(f'model {parts.policy.name} loaded, {len(parts.memory)} seed environments admitted: {time.perf_counter() - t0:.0f} s', flush=True)
    rows, admitted, tokens, secs = [], [], 0, 0.0
    for k, start in enumerate(range(0, a.designs, a.batch)):
        n = min(a.batch, a.designs - start)
        seeds, c = Seeds(cfg.seed).child(f'round-{k}'), cfg.override([f'selfplay.designs_per_iteration={n}'])
        t = time.perf_counter()
        drafts = write_designs(parts.policy, parts.memory, parts.corpus, c, seeds)
        designed = admit_designs(drafts, parts.memory, parts.heldout, c, k, seeds, policy=parts.policy)
        records = {i: parts.memory.get(i) for i in designed.new_envs}
        hinted = hint_stage(parts.policy, records, c, seeds)
        played = play_stage(parts.policy, records, hinted, c, seeds)
        per_env = score_stage(parts.memory, played, hinted, c, k, seeds)
        reward_stage(parts.memory, [d for d in designed.pending if d.env_id is not None], c, k)  # the probe's window: the round itself
        secs += time.perf_counter() - t; tokens += designed.tokens
        for r in designed.rows: r.reward = designed.pending[r.pending].reward if r.pending is not None else None
        for i in designed.new_envs:
            e = per_env.get(i)
            m = {**{key: v for key, v in asdict(e).items() if key != 'estimate'}, 'regret': e.regret, 'regret_lo': e.regret_lo,
                 'regret_hi': e.regret_hi} if e else {}
            admitted.append({'env_id': i, 'round': k, 'class': records[i].class_name, 'hint': hinted.hints.get(i), 'metrics': m, 'code': records[i].code})
        _append(out/'designs.jsonl', [{**asdict(r), 'round': k, 'prompt': drafts[r.design].prompt.messages if r.design < len(drafts) else None}
                                      for r in designed.rows])
        _append(out/'admitted.jsonl', admitted[len(admitted) - len(designed.new_envs):])
        _append(out/'episodes.jsonl', episode_rows(played, parts.policy))
        rows += designed.rows
        print(f'round {k}: {n} designs, {len(designed.new_envs)} admitted, reasons {dict(Counter(r.reason for r in designed.rows))}, '
              f'{time.perf_counter() - t:.0f} s', flush=True)
    firsts = [r for r in rows if r.attempt == 0]
    ok = sum(r.reason == 'ok' for r in firsts)  # new environments: a duplicate of one in the memory is refused
    lo, hi = wilson(ok, len(firsts))
    print(f'\nmodel {parts.policy.name}, {len(firsts)} designs ({sum(r.mode == "edit" for r in firsts)} in edit mode), '
          f'{len(rows) - len(firsts)} repairs; transcripts in {out}')
    print(f'admitted share: {ok}/{len(firsts)} = {ok / max(1, len(firsts)):.2f}, 90% interval [{lo:.2f}, {hi:.2f}] '
          f'(goal: at least one admitted design: {"met" if ok else "NOT met"})')
    print(f'tokens per design: {tokens / max(1, len(rows)):.0f}; seconds per design (writing, admitting, hinting, playing): {secs / max(1, len(rows)):.1f}')
    print('\nrejection reasons:')
    for reason, count in Counter(r.reason for r in rows if r.reason != 'ok').most_common():
        print(f'  {reason:<24}{count}')
    for e in admitted:
        m = e['metrics']
        print(f"\nadmitted {e['class']} (id {e['env_id']}): hint {e['hint']!r}\n  win rate with hint {m.get('win_rate_hint')}, without "
              f"{m.get('win_rate_nohint')}, regret {m.get('regret')} [{m.get('regret_lo')}, {m.get('regret_hi')}]")


if __name__ == '__main__':
    main()
