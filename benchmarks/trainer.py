"""Trainer costs: a training step against a plain peft forward and backward, then LoRA against QLoRA memory.

1. Our `Trainer.train_step` (advantages, micro-batching, clipped token loss, backward, clipping, AdamW)
   against a plain forward + backward of the same peft model on the same tokens, same precision, no KL
   on either side: ratio of median wall times (goal: overhead at most 15%).
2. Memory of a LoRA and a QLoRA (NF4) training step on the embedded model, each in its own subprocess: the loaded
   model's resident size, and the step's own peak above it (`MemoryPeak`), beside `step_memory`'s model of both.
About three minutes on 2 CPU cores.   python benchmarks/trainer.py [--seqs 8] [--len 256] [--reps 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MEM = r'''
import json, sys
import numpy as np
from spade_nb.core import Sample
from spade_nb.policy import load_policy
from spade_nb.trainer import MemoryPeak, ModelDims, Trainer, TrainerConfig, _status_bytes, step_memory
import bitsandbytes, peft, torch, transformers  # imported before the baseline: the libraries are not the model
before = _status_bytes('VmRSS')
pol = load_policy(quantization=sys.argv[1])
seqs, L = int(sys.argv[2]), int(sys.argv[3])
cfg = TrainerConfig(lr=1e-4, micro_batch_tokens=seqs * L, max_seq_len=L)
tr = Trainer(pol, cfg)
rng = np.random.default_rng(0)
ss = [Sample(rng.integers(3, 40000, L).tolist(), [0] * (L // 4) + [1] * (L - L // 4), [0.0] * (L // 4) + [-10.0] * (L - L // 4), 'agent',
             float(i % 2), 'g') for i in range(seqs)]
tr.train_step(ss)  # warm-up: the optimizer's state exists after it
with MemoryPeak() as m: tr.train_step(ss)
est = step_memory(ModelDims.of(pol.model.config, quantization=sys.argv[1]), cfg)
tensors = sum(t.numel() * t.element_size() for t in [*tr.model.parameters(), *tr.model.buffers()])
print(json.dumps({'loaded_mb': (m.resting - before) / 2**20, 'tensors_mb': tensors / 2**20, 'peak_mb': m.peak / 2**20, 'model_peak_mb': est['step_peak'] / 2**20,
                  'model_resting_mb': est['resting'] / 2**20}))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seqs', type=int, default=8)
    ap.add_argument('--len', type=int, default=256)
    ap.add_argument('--reps', type=int, default=3)
    a = ap.parse_args()
    import numpy as np
    import torch
    from spade_nb.core import Sample
    from spade_nb.policy import load_policy
    from spade_nb.trainer import Trainer, TrainerConfig

    pol = load_policy()
    tr = Trainer(pol, TrainerConfig(lr=1e-5, micro_batch_tokens=a.seqs * a.len))
    rng = np.random.default_rng(0)
    prompt = a.len // 4
    samples = [Sample(rng.integers(3, 40000, a.len).tolist(), [0] * prompt + [1] * (a.len - prompt),
                      [0.0] * prompt + [-1.0] * (a.len - prompt), 'agent', float(i % 2), 'g') for i in range(a.seqs)]
    ids = torch.tensor([s.token_ids for s in samples])
    att = torch.ones_like(ids)
    mask = torch.tensor([s.loss_mask for s in samples], dtype=torch.float32)

    def plain():
        tr.model.train()
        logits = tr.model(input_ids=ids, attention_mask=att).logits[:, :-1].float()
        lp = torch.log_softmax(logits, -1).gather(2, ids[:, 1:, None]).squeeze(2)
        loss = -(lp * mask[:, 1:]).sum() / mask.sum()
        loss.backward()
        tr.model.zero_grad(set_to_none=True)

    def ours(): tr.train_step(samples)

    plain(); ours()  # warm-up
    tp, to = [], []
    for _ in range(a.reps):
        t = time.perf_counter(); plain(); tp.append(time.perf_counter() - t)
        t = time.perf_counter(); ours(); to.append(time.perf_counter() - t)
    mp, mo = statistics.median(tp), statistics.median(to)
    print(f'{a.seqs} sequences x {a.len} tokens, LoRA r=16 on q,k,v,o, fp32 on {torch.get_num_threads()} threads, {a.reps} reps')
    print(f'plain peft forward+backward  median {mp:.2f} s')
    print(f'Trainer.train_step           median {mo:.2f} s')
    print(f'overhead {mo / mp - 1:+.1%}   (goal <= +15%: {"met" if mo / mp <= 1.15 else "NOT met"})')
    env = {**os.environ, 'MALLOC_MMAP_THRESHOLD_': '65536'}  # freed tensors go back to the system: the resident set follows them
    print(f'memory of one training step ({a.seqs} x {a.len} tokens), measured in a fresh process each; modelled: spade_nb.trainer.step_memory')
    for q in ('none', 'nf4'):
        r = subprocess.run([sys.executable, '-c', MEM, q, str(a.seqs), str(a.len)], capture_output=True, text=True, env=env)
        name = 'LoRA (fp32 base)' if q == 'none' else 'QLoRA (NF4 base)'
        if r.returncode != 0:
            print(f'{name:<17} failed: {r.stderr.strip().splitlines()[-1][:200]}'); continue
        m = json.loads(r.stdout.strip().splitlines()[-1])
        print(f"{name:<17} loaded model, adapter and optimizer {m['loaded_mb']:5.0f} MB resident, its tensors {m['tensors_mb']:4.0f} MB "
              f"(modelled {m['model_resting_mb']:.0f} MB);  step peak above it {m['peak_mb']:5.0f} MB (modelled {m['model_peak_mb']:.0f} MB, "
              f"{m['model_peak_mb'] / m['peak_mb']:.2f}x; goal within 25%: {'met' if abs(m['model_peak_mb'] / m['peak_mb'] - 1) <= 0.25 else 'NOT met'})")

if __name__ == '__main__':
    main()
