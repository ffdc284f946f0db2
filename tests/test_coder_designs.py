"""Admission on the designs a real model wrote: the 28 first drafts of Qwen2.5-Coder-1.5B-Instruct read on 2026-12-01
(tests/data/coder_designs.jsonl: the reply as the model wrote it, admission's reason then, and what reading it found).

Two probes (`benchmarks/designer_probe.py`: 8 designs before the cold-start exemplars, 16 after) and the first iteration
of `spade selfplay --preset coder-cpu` before unscored environments stopped being edited. Every rejection was read: none
was a valid, winnable environment refused (no false rejection), so each must still be refused for the reason its
reading gives, and the one admitted design must still be admitted. A copy is refused by the memory, not by admission:
its structure is a seed's."""
import json
from pathlib import Path

import pytest

from spade_nb.admission import AdmissionConfig, admit_many, check_structure
from spade_nb.designer import Design, _why, parse_design
from spade_nb.memory import structural_fingerprint
from spade_nb.seeds import seed_sources

# The false rejection the preset's run found: a coder's solution() passed a number drawn from np_random (numpy's int64)
# to tool_call, which could not send it as JSON, and admission called the environment a crash. Its own environment was
# broken besides (a numpy array used as a list); this one, built the same way, is valid and winnable.
NUMPY_ARGUMENTS = '''\
from spade_nb.envs import ToolEnv, tool_call, final_answer
import numpy as np


class RoomEnv(ToolEnv):
    "One minute of the working day is free: find it with is_free, book it, then answer done."
    max_turns = 12

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        # a numpy int64, as np_random gives; 480 minutes, so that four admission seeds share one with odds of 1e-8
        self.free = self.np_random.integers(540, 1020)
        self.booked = None
        return ('One minute from 540 to 1019 (minutes after midnight) is free. Ask about minutes with is_free, book the '
                'free one, then answer "done".'), {}

    def tool_is_free(self, minute: int) -> str:
        "Whether a minute is free."
        return 'free' if minute == self.free else 'taken'

    def tool_book(self, minute: int) -> str:
        "Book a minute."
        if minute != self.free: return 'taken'
        self.booked = minute
        return 'booked'

    def check_answer(self, answer: str) -> float:
        return 1.0 if self.booked == self.free and answer.strip() == 'done' else 0.0

    def solution(self):
        return [tool_call('book', minute=self.free), final_answer('done')]
'''

ROWS = [json.loads(line) for line in (Path(__file__).parent/'data'/'coder_designs.jsonl').read_text().splitlines()]


def test_the_record_is_whole():
    assert len(ROWS) == 28 and all(r['note'] and r['reply'] for r in ROWS)
    assert {r['reading'] for r in ROWS} == {'broken', 'copy', 'admitted'}  # no design read as a false rejection
    assert sum(r['mode'] == 'edit' for r in ROWS) == 8 and sum(r['reading'] == 'copy' for r in ROWS) == 7


@pytest.fixture(scope='module')
def verdicts():
    codes = [parse_design(r['reply']).code for r in ROWS]
    return codes, admit_many(codes, [[101, 202, 303, 404]] * len(codes), AdmissionConfig())


def test_every_broken_design_is_refused_for_its_reason(verdicts):
    codes, vs = verdicts
    for r, v in zip(ROWS, vs):
        if r['reading'] == 'broken': assert (v.ok, v.reason) == (False, r['reason']), (r['run'], r['index'], r['note'], v)


def test_the_admitted_design_and_the_copies_pass_admission_and_the_copies_are_seeds(verdicts):
    codes, vs = verdicts
    seeds = {structural_fingerprint(s) for s in seed_sources().values()}
    for r, c, v in zip(ROWS, codes, vs):
        if r['reading'] == 'admitted': assert v.ok and structural_fingerprint(c) not in seeds, v
        if r['reading'] == 'copy': assert v.ok and r['reason'] == 'duplicate' and structural_fingerprint(c) in seeds, (r['run'], r['index'])


def test_what_the_designer_is_told():
    "The messages these designs led to: a module with its own base classes is named, a cut-off reply is called cut off."
    own = next(r for r in ROWS if 'its own TextEnv' in r['note'])
    assert 'defines its own TextEnv and ToolEnv' in check_structure(parse_design(own['reply']).code).details
    cut = next(r for r in ROWS if 'token limit' in r['note'])
    d = Design(None, None, parse_design(cut['reply']))
    assert d.parsed.reason == 'unclosed_fence' and 'cut off at the token limit' in _why((d, check_structure(d.code)))[1]


def test_numbers_from_np_random_reach_the_tools():
    from spade_nb.admission import admit
    v = admit(NUMPY_ARGUMENTS)
    assert v.ok, v
