"""``core.model.trace.record(progress=…)``: told once per block, in order, after the block ran; a callback that raises
ends the pass with nothing kept and nothing left hooked. Blocks are counted by hooks of the test's own on the loaded
model's blocks (the model's config gives how many there are)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.model.trace import record

TEXT = "The cat sat on the mat. It was happy to be home, and the bass fish swims along the river bank."
TARGET = "The cat sat on the mat."


class Stopped(Exception):
    pass


def _blocks(model, stacks: tuple[str, ...]) -> list[torch.nn.Module]:
    base = model.model
    return [block for stack in stacks for block in base.get_submodule(stack)]


def _watched(blocks):
    """A counter of blocks run (forward hooks of the test's own) and the hooks' handles."""
    ran = [0]
    handles = [b.register_forward_hook(lambda *_: ran.__setitem__(0, ran[0] + 1)) for b in blocks]
    return ran, handles


@pytest.mark.parametrize("which", ["gpt2", "t5"])
def test_progress_is_told_after_each_block_in_order(which, tiny_gpt2, tiny_t5):
    model = tiny_gpt2 if which == "gpt2" else tiny_t5
    config = model.model.config
    if which == "gpt2":
        blocks, total = _blocks(model, ("h",)), config.n_layer
    else:  # encoder, then decoder, counted together
        blocks, total = _blocks(model, ("encoder.block", "decoder.block")), config.num_layers + config.num_decoder_layers
    assert len(blocks) == total
    ran, handles = _watched(blocks)
    told = []
    try:
        record(model, (TEXT, TARGET) if which == "t5" else TEXT,
               progress=lambda done, all_: told.append((done, all_, ran[0])))
    finally:
        for h in handles:
            h.remove()
    # (0, total) before any block; then (i, total) once block i has run, never before
    assert told == [(i, total, i) for i in range(total + 1)]


def test_a_raising_callback_ends_the_pass_and_nothing_is_kept(tiny_gpt2):
    blocks = _blocks(tiny_gpt2, ("h",))
    before = record(tiny_gpt2, TEXT)
    hooks_before = [(len(b._forward_hooks), len(b._forward_pre_hooks)) for b in blocks]
    threads = torch.get_num_threads()
    ran, handles = _watched(blocks)

    def stop_at_2(done, total):
        if done == 2:
            raise Stopped

    try:
        with pytest.raises(Stopped):
            record(tiny_gpt2, TEXT, progress=stop_at_2)
        assert ran[0] == 2  # the pass ended after block 2: the remaining blocks never ran
    finally:
        for h in handles:
            h.remove()
    assert [(len(b._forward_hooks), len(b._forward_pre_hooks)) for b in blocks] == hooks_before  # nothing left hooked
    assert torch.get_num_threads() == threads
    after = record(tiny_gpt2, TEXT)  # the model reads as before: same residual stream, same weights
    np.testing.assert_array_equal(after.residual["self"], before.residual["self"])
    np.testing.assert_array_equal(after.attention("self", 1), before.attention("self", 1))


def test_a_callback_raising_a_base_exception_ends_it_too(tiny_gpt2):
    """Streamlit's own stop (a rerun after a click on Stop) is a BaseException, raised by the bar's update."""

    class Rerun(BaseException):
        pass

    def rerun(done, total):
        if done == 1:
            raise Rerun

    with pytest.raises(Rerun):
        record(tiny_gpt2, TEXT, progress=rerun)
    assert record(tiny_gpt2, TEXT).num_layers("self") == tiny_gpt2.model.config.n_layer
