"""Make `tests/data/bfcl_reference.json.gz`: scripted replies to BFCL v4 multi_turn_base cases, scored by bfcl-eval's
own inference loop (`BaseHandler.inference_multi_turn_prompting`), decoder (its Qwen function-calling handler, the
`<tool_call>` JSON format spade_nb's agents write) and checker (`eval_runner._evaluate_single_multi_turn_entry`).

bfcl-eval pins numpy 1.26.4 and pulls a large stack, so it runs in a venv of its own, never in spade_nb's:

    python -m venv /tmp/bfclvenv
    /tmp/bfclvenv/bin/pip install bfcl-eval==2026.3.23
    /tmp/bfclvenv/bin/python scripts/bfcl_reference.py --cases 25

(The committed table was made on 2026-12-07 in a venv holding bfcl-eval's wheel installed with --no-deps and the
packages its modules import, without sentence-transformers and its torch.)

Each case is played in every form of `forms()` by a handler whose model is the script; every form plays under a model
name of its own, so no backend state carries from one play to the next. The file holds each play's replies and bfcl's
verdict; `nbs/19_evaluate.ipynb` replays the same replies through the `bfcl` suite's environment and compares.
"""
import argparse
import gzip
import json
import sys
from pathlib import Path

from overrides import override

from bfcl_eval.eval_checker.eval_runner import _evaluate_single_multi_turn_entry
from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler
from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

CATEGORY = 'multi_turn_base'
NO_TOOL = {'name': 'no_such_tool', 'arguments': {}}


def block(call: dict) -> str:
    "One call in the Qwen format bfcl's handler decodes: `<tool_call>\\n{json}\\n</tool_call>`."
    return f'<tool_call>\n{json.dumps(call)}\n</tool_call>'


def as_call(text: str, classes: list[str]) -> dict:
    """A ground-truth call string `name(...)` as {'name', 'arguments'}: positional arguments named by the backend
    method's signature, as spade_nb's environment names them in its solution."""
    import ast
    import importlib
    import inspect
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import CLASS_FILE_PATH_MAPPING
    node = ast.parse(text, mode='eval').body
    methods = {n: m for c in classes for n, m in
               inspect.getmembers(getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[c]), c), inspect.isfunction)}
    params = list(inspect.signature(methods[node.func.id]).parameters)[1:]
    args = dict(zip(params, (ast.literal_eval(a) for a in node.args)))
    args.update((k.arg, ast.literal_eval(k.value)) for k in node.keywords)
    return {'name': node.func.id, 'arguments': args}


def forms(truth: list[list[str]], classes: list[str]) -> dict[str, list[list[str]]]:
    "Replies, turn by turn, of each scripted play."
    calls = [[as_call(c, classes) for c in turn] for turn in truth]
    done = 'Done.'
    out = {
        'one-per-reply': [[block(c) for c in turn] + [done] for turn in calls],
        'all-in-one-reply': [(['\n'.join(block(c) for c in turn)] if turn else []) + [done] for turn in calls],
        'arguments-as-json-text': [[block({'name': c['name'], 'arguments': json.dumps(c['arguments'])})
                                    for c in turn] + [done] for turn in calls],
        'stop-at-once': [[done] for _ in calls],
        'last-call-dropped': [[block(c) for c in turn] + [done] for turn in calls[:-1]]
                             + [[block(c) for c in calls[-1][:-1]] + [done]],
        'first-call-twice': [[block(c) for c in (turn[:1] + turn)] + [done] for turn in calls],
        'over-steps-in-last-turn': [[block(c) for c in turn] + [done] for turn in calls[:-1]]
                                   + [[block(c) for c in calls[-1]] + [block(NO_TOOL)] * 21 + [done]],
        'over-steps-in-first-turn': [[block(NO_TOOL)] * 21 + [done]] + [[block(c) for c in turn] + [done]
                                                                       for turn in calls[1:]],
    }
    return out


class Scripted(QwenFCHandler):
    "bfcl's Qwen function-calling handler whose model is a list of replies, one turn at a time."
    def __init__(self, name: str, replies: list[list[str]]):
        super().__init__(name, 0.0, name, False)
        self.replies, self.turn, self.k = replies, 0, 0

    @override
    def _query_prompting(self, inference_data: dict):
        "The next scripted reply, as the completions API would return it (bfcl's own parsing reads it)."
        from types import SimpleNamespace
        users = sum(m['role'] == 'user' for m in inference_data['message'])
        if users - 1 != self.turn: self.turn, self.k = users - 1, 0  # a new turn's request has come
        turn = self.replies[self.turn] if self.turn < len(self.replies) else ['Done.']
        reply = turn[self.k] if self.k < len(turn) else 'Done.'
        self.k += 1
        return SimpleNamespace(choices=[SimpleNamespace(text=reply)],
                               usage=SimpleNamespace(prompt_tokens=0, completion_tokens=0)), 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--cases', type=int, default=25)
    ap.add_argument('--out', default=str(Path(__file__).resolve().parents[1]/'tests'/'data'/'bfcl_reference.json.gz'))
    args = ap.parse_args()
    entries = load_dataset_entry(CATEGORY)[:args.cases]
    truths = {t['id']: t['ground_truth'] for t in load_ground_truth_entry(CATEGORY)}
    rows = []
    for e in entries:
        for form, replies in forms(truths[e['id']], e['involved_classes']).items():
            name = f"ref_{form.replace('-', '_')}_{e['id']}"
            h = Scripted(name, replies)
            entry = json.loads(json.dumps(e))
            result, _ = h.inference_multi_turn_prompting(entry, include_input_log=False, exclude_state_log=True)
            verdict = _evaluate_single_multi_turn_entry(h, e['id'], result, truths[e['id']], entry,
                                                        h.model_name_underline_replaced, CATEGORY)
            rows.append({'id': e['id'], 'form': form, 'replies': replies, 'valid': bool(verdict['valid'])})
        print(e['id'], {r['form']: r['valid'] for r in rows if r['id'] == e['id']}, file=sys.stderr)
    import importlib.metadata as md
    doc = {'bfcl_eval': md.version('bfcl-eval'), 'category': CATEGORY, 'handler': 'QwenFCHandler', 'rows': rows}
    with gzip.open(args.out, 'wt') as f: json.dump(doc, f)
    print(f'{len(rows)} plays, {sum(r["valid"] for r in rows)} valid: {args.out}')


if __name__ == '__main__':
    main()
