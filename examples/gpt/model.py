"""A small GPT-style language model over bytes (vocabulary 256), written so every parallel mode can split it.

Pre-norm transformer blocks (``blocks``, an ``nn.ModuleList``), each an attention with separate ``q``, ``k``, ``v``
and ``o`` projections and an MLP ``fc1`` -> GELU -> ``fc2``: the names trainops' tensor parallelism pairs up
(``q``/``k``/``v``/``fc1`` column-wise, ``o``/``fc2`` row-wise). Attention takes the number of heads from the tensor
it gets, so after a tensor-parallel split each rank runs its share of the heads. No weight tying and no dropout by
default, so that every mode computes the same numbers (weight tying would share one parameter between the embedding,
which stays whole, and the head).

Sizes: ``tiny`` (tests on CPU, 2 layers of width 32), ``small`` (a CPU demo), ``250m`` (the GPU benchmark: about
255 M parameters, sequence 1024).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class GPTConfig:
    """The shape of the model."""

    seq_len: int
    d_model: int
    n_layer: int
    n_head: int
    vocab_size: int = 256
    mlp_ratio: int = 4
    dropout: float = 0.0

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head


SIZES = {
    "tiny": GPTConfig(seq_len=32, d_model=32, n_layer=2, n_head=4),
    "small": GPTConfig(seq_len=256, d_model=256, n_layer=4, n_head=4),
    # 9 blocks of width 1536 (12 heads of 128): 12 * 1536^2 * 9 = 255 M parameters in the blocks.
    "250m": GPTConfig(seq_len=1024, d_model=1536, n_layer=9, n_head=12),
}


class Attention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.head_dim = config.head_dim
        self.q = nn.Linear(config.d_model, config.d_model, bias=False)
        self.k = nn.Linear(config.d_model, config.d_model, bias=False)
        self.v = nn.Linear(config.d_model, config.d_model, bias=False)
        self.o = nn.Linear(config.d_model, config.d_model, bias=False)
        self.dropout = config.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, time, _ = x.shape
        # -1 heads: all of them on one rank, heads / tp after a tensor-parallel split of q, k, v.
        q, k, v = (projection(x).view(batch, time, -1, self.head_dim).transpose(1, 2)
                   for projection in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.o(y.transpose(1, 2).reshape(batch, time, -1))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, config.mlp_ratio * config.d_model, bias=False)
        self.fc2 = nn.Linear(config.mlp_ratio * config.d_model, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.d_model)
        self.attn = Attention(config)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token + position embeddings, ``n_layer`` blocks, a final norm and a linear head to byte logits."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.seq_len, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.apply(self._init)
        # GPT-2's scaled initialisation of the projections that write into the residual stream.
        for name, parameter in self.named_parameters():
            if name.endswith(("attn.o.weight", "mlp.fc2.weight")):
                nn.init.normal_(parameter, std=0.02 / (2 * config.n_layer) ** 0.5)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok_emb(tokens) + self.pos_emb(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def parameter_count(config: GPTConfig, embeddings: bool = True) -> int:
    """Parameters of a model of this shape, from the shape alone (works on a sharded model too)."""
    d, layers, vocab = config.d_model, config.n_layer, config.vocab_size
    per_block = 4 * d * d + 2 * config.mlp_ratio * d * d + 4 * d  # q k v o, fc1 fc2, two LayerNorms
    body = layers * per_block + 2 * d + d * vocab  # blocks, final norm, head
    return body + (vocab * d + config.seq_len * d if embeddings else 0)


def flops_per_token(config: GPTConfig) -> float:
    """Training FLOPs per token (forward + backward): 6 per non-embedding parameter plus attention's score and value
    products, 12 * layers * width * sequence (the PaLM paper's accounting; causal masking not discounted)."""
    return 6.0 * parameter_count(config, embeddings=False) + 12.0 * config.n_layer * config.d_model * config.seq_len
