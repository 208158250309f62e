"""Transformer blocks: finding them, the column/row-wise plan, wrapping for checkpointing / offloading."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from trainops.runtime.smp_native import ParallelismError
from trainops.runtime.tensor_parallel import block_plan, find_blocks, parallelize_blocks, wrap_blocks


class Attention(nn.Module):
    def __init__(self, width: int, fused: bool = False):
        super().__init__()
        if fused:
            self.qkv = nn.Linear(width, 3 * width)
        else:
            self.q, self.k, self.v = (nn.Linear(width, width) for _ in range(3))
        self.o = nn.Linear(width, width)


class Block(nn.Module):
    def __init__(self, width: int = 8, fused: bool = False):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.attn = Attention(width, fused)
        self.mlp = nn.Sequential()
        self.mlp.fc1 = nn.Linear(width, 4 * width)
        self.mlp.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        h = self.norm(x)
        x = x + self.attn.o(torch.tanh(self.attn.q(h) + self.attn.k(h) * self.attn.v(h)))
        return x + self.mlp.fc2(torch.relu(self.mlp.fc1(x)))


class Model(nn.Module):
    def __init__(self, layers: int = 3):
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.heads = nn.ModuleList([nn.Linear(8, 2), nn.Linear(8, 3)])  # mixed classes: not the blocks
        self.layers = nn.ModuleList(Block() for _ in range(layers))

    def forward(self, x):
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return self.heads[0](x)


class FakeMesh:
    def __init__(self, size: int):
        self._size = size

    def size(self) -> int:
        return self._size


def test_blocks_are_the_largest_list_of_one_class():
    model = Model(layers=3)
    assert find_blocks(model) == list(model.layers)
    assert find_blocks(model, [model.layers[0]]) == [model.layers[0]]


def test_no_blocks_is_an_error_only_when_they_are_needed():
    plain = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    with pytest.raises(ParallelismError, match="cannot find the transformer blocks of Sequential"):
        find_blocks(plain)
    assert find_blocks(plain, required=False) == []
    with pytest.raises(ParallelismError, match="empty"):
        find_blocks(plain, [])


def test_plan_pairs_fan_out_and_fan_in_layers_by_name():
    assert block_plan(Block()) == {"attn.q": "colwise", "attn.k": "colwise", "attn.v": "colwise",
                                   "attn.o": "rowwise", "mlp.fc1": "colwise", "mlp.fc2": "rowwise"}


def test_fused_query_key_value_is_refused():
    with pytest.raises(ParallelismError, match="attn.qkv is a fused query/key/value layer"):
        block_plan(Block(fused=True))


def test_an_explicit_plan_wins_and_is_checked():
    assert block_plan(Block(), {"mlp.fc1": "colwise", "mlp.fc2": "rowwise"}) == {"mlp.fc1": "colwise",
                                                                                "mlp.fc2": "rowwise"}
    with pytest.raises(ParallelismError, match="styles must be 'colwise' or 'rowwise'"):
        block_plan(Block(), {"mlp.fc1": "columns"})


def test_blocks_without_a_pair_or_with_indivisible_features_are_refused():
    lonely = nn.Module()
    lonely.fc1 = nn.Linear(8, 8)
    with pytest.raises(ParallelismError, match="no column-wise / row-wise pair"):
        parallelize_blocks([lonely], FakeMesh(2))
    with pytest.raises(ParallelismError, match=r"tensor_parallel_degree=3 must divide the output features of "
                                               r"Block.attn.q \(8\)"):
        parallelize_blocks([Block()], FakeMesh(3))


@pytest.mark.parametrize("checkpoint, offload, wrapper", [
    (True, False, "CheckpointWrapper"),
    (False, True, "OffloadWrapper"),
    (True, True, "OffloadWrapper"),
])
def test_wrapped_blocks_compute_the_same_values_and_gradients(checkpoint, offload, wrapper):
    torch.manual_seed(0)
    reference = Model()
    model = Model()
    model.load_state_dict(reference.state_dict())
    wrapped = wrap_blocks(model, find_blocks(model), checkpoint=checkpoint, offload=offload)
    assert [type(block).__name__ for block in model.layers] == [wrapper] * 3
    assert list(model.layers) == wrapped
    x = torch.randn(5, 4)
    reference(x).square().sum().backward()
    model(x).square().sum().backward()
    for (name, expected), (_, got) in zip(reference.named_parameters(), model.named_parameters(), strict=True):
        if expected.grad is None:  # heads[1] takes no part
            assert got.grad is None, name
            continue
        # Recomputation and the wrappers' hooks may order autograd's sums differently: equal to float rounding.
        assert torch.allclose(expected.grad, got.grad, rtol=1e-5, atol=1e-5), name
    # The state dict keeps working names underneath the wrappers (checkpoints stay loadable).
    assert any("layers.0" in key for key in model.state_dict())


def test_nothing_is_wrapped_when_nothing_is_asked():
    model = Model()
    blocks = find_blocks(model)
    assert wrap_blocks(model, blocks, checkpoint=False, offload=False) == blocks
    assert all(type(block) is Block for block in model.layers)
