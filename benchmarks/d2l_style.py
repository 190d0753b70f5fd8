"""The textbook pipeline: attn_course's Bahdanau model written the way d2l writes it, for the benchmarks.

What makes it the textbook pipeline (d2l 1.0.3, sections 10.5-10.7 and 11.4):
- every sentence is padded (or cut) to one fixed ``num_steps`` (d2l's ``MTFraEng._build_arrays``), so
  every batch runs ``num_steps`` decoder steps and attends over ``num_steps`` keys, padding or not;
- the decoder calls ``d2l.AdditiveAttention(queries, keys, values, valid_lens)`` inside its step loop, so
  ``W_k keys`` is recomputed at every step, and masks with ``d2l.masked_softmax`` (-1e6 fill);
- the loss is d2l's ``Seq2Seq.loss`` (cross-entropy weighted by ``Y != <pad>``), the training loop d2l's
  ``Trainer.fit_epoch`` with its ``clip_gradients``;
- prediction is d2l's: ``predict_step`` runs all ``num_steps`` steps for a batch, even after <eos>;
  ``predict_seq2seq`` translates one sentence at a time.

What it shares with attn_course, so that both compute the same numbers from the same weights: the
architecture of `attn_course.models.decoders.BahdanauDecoder` (query s_{t-1}, GRU input [e(y_{t-1}); c_t],
output layer over [s_t; c_t; e(y_{t-1})], same sizes) and the encoder itself (the same
`attn_course.models.encoders.Encoder` module, copied: d2l's encoder neither packs the padding nor is
bidirectional, and a different encoder would change the model, not the pipeline). `from_attn_course(model)`
builds the reference with the weights of an attn_course Seq2Seq.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import d2l.torch as d2l
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

from attn_course.data.tasks import Batch, TranslationDataset, Vocab
from attn_course.models.encoders import Encoder
from attn_course.models.seq2seq import Seq2Seq


class D2LStyleBahdanauDecoder(nn.Module):
    """d2l's ``Seq2SeqAttentionDecoder`` (sec. 11.4), with attn_course's BahdanauDecoder's computation.

    Time-major inside, like d2l; ``forward(X (batch_size, num_steps) long, state) -> (logits
    (batch_size, num_steps, vocab_size), state)`` with state = [enc_outputs (batch_size, S, enc_size),
    hidden (num_layers, batch_size, num_hiddens), enc_valid_lens (batch_size,)]. Per step, as in
    Bahdanau et al. 2014, appendix A.2.2: c_t = attention(s_{t-1}, h), s_t = GRU([e(y_{t-1}); c_t], s_{t-1}),
    logits_t = W_o [s_t; c_t; e(y_{t-1})]. The layers are LazyLinear, as in d2l: call `materialize` (one
    forward) before copying weights into them.
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int = 1, *,
                 enc_size: int, attn_hiddens: int | None = None, dropout: float = 0.0, pad: int = 0):
        super().__init__()
        self.attention = d2l.AdditiveAttention(attn_hiddens or num_hiddens, dropout=0.0)
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=pad)
        self.dropout = nn.Dropout(dropout)
        self.rnn = nn.GRU(embed_size + enc_size, num_hiddens, num_layers,
                          dropout=dropout if num_layers > 1 else 0.0)
        self.dense = nn.LazyLinear(vocab_size)

    def init_state(self, enc_outputs: tuple[Tensor, Tensor], enc_valid_lens: Tensor) -> list:
        """[enc_outputs (batch_size, S, enc_size), s_0 (num_layers, batch_size, num_hiddens), valid_lens]."""
        outputs, hidden_state = enc_outputs
        return [outputs, hidden_state, enc_valid_lens]

    def forward(self, X: Tensor, state: list) -> tuple[Tensor, list]:
        enc_outputs, hidden_state, enc_valid_lens = state
        X = self.dropout(self.embedding(X)).permute(1, 0, 2)        # (num_steps, batch_size, embed_size)
        features, self._attention_weights = [], []
        for x in X:
            query = torch.unsqueeze(hidden_state[-1], dim=1)          # s_{t-1}: (batch_size, 1, num_hiddens)
            # W_k enc_outputs is recomputed here, at every step.
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_lens)
            x = torch.unsqueeze(x, dim=1)                             # (batch_size, 1, embed_size)
            out, hidden_state = self.rnn(torch.cat((x, context), dim=-1).permute(1, 0, 2), hidden_state)
            features.append(torch.cat((out, context.permute(1, 0, 2), x.permute(1, 0, 2)), dim=-1))
            self._attention_weights.append(self.attention.attention_weights)
        outputs = self.dense(self.dropout(torch.cat(features, dim=0)))
        return outputs.permute(1, 0, 2), [enc_outputs, hidden_state, enc_valid_lens]

    @property
    def attention_weights(self) -> list[Tensor]:
        return self._attention_weights


class D2LStyleSeq2Seq(nn.Module):
    """d2l's ``EncoderDecoder``: forward(enc_X, dec_X, enc_valid_lens) -> logits (batch_size, num_steps, V).

    enc_X (batch_size, S) long, dec_X (batch_size, num_steps) long, enc_valid_lens (batch_size,) long.
    """

    def __init__(self, encoder: Encoder, decoder: D2LStyleBahdanauDecoder, tgt_pad: int = 0):
        super().__init__()
        self.encoder, self.decoder, self.tgt_pad = encoder, decoder, tgt_pad

    def forward(self, enc_X: Tensor, dec_X: Tensor, enc_valid_lens: Tensor) -> Tensor:
        enc = self.encoder(enc_X, enc_valid_lens)
        dec_state = self.decoder.init_state((enc.outputs, enc.state), enc_valid_lens)
        return self.decoder(dec_X, dec_state)[0]

    def loss(self, Y_hat: Tensor, Y: Tensor) -> Tensor:
        """d2l's Seq2Seq.loss: mean cross-entropy over the positions whose label is not <pad>."""
        l = F.cross_entropy(Y_hat.reshape(-1, Y_hat.shape[-1]), Y.reshape(-1), reduction="none")
        mask = (Y.reshape(-1) != self.tgt_pad).type(torch.float32)
        return (l * mask).sum() / mask.sum()

    def materialize(self) -> None:
        """Run one forward on a dummy batch so that every LazyLinear gets its weights (d2l's way)."""
        device = next(self.encoder.parameters()).device
        src = torch.ones(1, 2, dtype=torch.long, device=device)
        with torch.no_grad():
            self(src, src, torch.tensor([2], device=device))


def from_attn_course(model: Seq2Seq) -> D2LStyleSeq2Seq:
    """The d2l-style twin of an attn_course Bahdanau model: same sizes, a copy of the same weights.

    model: a Seq2Seq whose decoder is a GRU BahdanauDecoder. The encoder is deep-copied; the decoder's
    weights are copied after one materialising forward (d2l's layers are LazyLinear).
    """
    decoder = model.decoder
    if model.kind != "bahdanau" or decoder.cell != "gru":
        raise ValueError(f"from_attn_course needs a GRU Bahdanau model, got kind={model.kind!r}, "
                         f"cell={decoder.cell!r} (d2l's attention decoder is a GRU with additive attention)")
    twin_decoder = D2LStyleBahdanauDecoder(decoder.vocab_size, decoder.embed_size, decoder.num_hiddens,
                                           decoder.num_layers, enc_size=decoder.enc_size,
                                           attn_hiddens=decoder.attention.w_v.in_features,
                                           dropout=decoder.dropout.p, pad=decoder.pad)
    twin = D2LStyleSeq2Seq(copy.deepcopy(model.encoder), twin_decoder, tgt_pad=decoder.pad)
    twin.to(next(model.parameters()).device)
    twin.materialize()
    state = {("dense" + key[len("output"):] if key.startswith("output") else key): value
             for key, value in decoder.state_dict().items()}
    twin.decoder.load_state_dict(state)
    return twin.train(model.training)


# --------------------------------------------------------------------------------------------- data
def pad_or_trim(ids: list[int], num_steps: int, pad: int) -> list[int]:
    """d2l's pad_or_trim: cut a sequence to num_steps tokens or pad it with <pad> up to num_steps."""
    return ids[:num_steps] if len(ids) > num_steps else ids + [pad] * (num_steps - len(ids))


def fixed_length_batch(items: Sequence[tuple[int, list[int], list[int]]], src_vocab: Vocab, tgt_vocab: Vocab,
                       num_steps: int) -> Batch:
    """A Batch of d2l's fixed-length arrays: every row padded (or cut) to num_steps positions.

    As d2l's _build_arrays: src = pad_or_trim(x + <eos>), tgt = <bos> + pad_or_trim(y + <eos>);
    tgt_in = tgt[:-1], tgt_out = tgt[1:], valid lengths count the non-<pad> positions.
    """
    src = torch.tensor([pad_or_trim(s + [src_vocab.eos], num_steps, src_vocab.pad) for _, s, _ in items])
    tgt = torch.tensor([[tgt_vocab.bos] + pad_or_trim(t + [tgt_vocab.eos], num_steps, tgt_vocab.pad)
                        for _, _, t in items])
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    return Batch(src, (src != src_vocab.pad).sum(1), tgt_in, tgt_out, (tgt_out != tgt_vocab.pad).sum(1),
                 torch.tensor([i for i, _, _ in items]))


def fixed_length_loader(dataset: TranslationDataset, batch_size: int, num_steps: int, *, shuffle: bool = True,
                        seed: int = 0) -> DataLoader:
    """d2l's training loader: random batches (shuffled each epoch), every sentence at num_steps positions."""
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=generator,
                      collate_fn=lambda items: fixed_length_batch(items, dataset.src_vocab, dataset.tgt_vocab,
                                                                  num_steps))


# --------------------------------------------------------------------------------------------- training
def clip_gradients(grad_clip_val: float, model: nn.Module) -> None:
    """d2l's Trainer.clip_gradients: rescale all gradients when their global norm exceeds grad_clip_val."""
    params = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
    norm = torch.sqrt(sum(torch.sum(p.grad**2) for p in params))
    if norm > grad_clip_val:
        for param in params:
            param.grad[:] *= grad_clip_val / norm


def training_step(model: D2LStyleSeq2Seq, batch: Batch, optimizer: torch.optim.Optimizer,
                  grad_clip_val: float | None = 1.0) -> float:
    """One step of d2l's Trainer.fit_epoch on a Batch (already on the model's device); returns the loss."""
    Y_hat = model(batch.src, batch.tgt_in, batch.src_valid_lens)
    loss = model.loss(Y_hat, batch.tgt_out)
    optimizer.zero_grad()
    with torch.no_grad():
        loss.backward()
        if grad_clip_val:
            clip_gradients(grad_clip_val, model)
        optimizer.step()
    return loss.item()


def fit_epoch(model: D2LStyleSeq2Seq, loader: DataLoader, optimizer: torch.optim.Optimizer,
              grad_clip_val: float | None = 1.0, device: torch.device | str = "cpu") -> float:
    """d2l's Trainer.fit_epoch (without its live plot): returns the mean of the batch losses."""
    model.train()
    losses = [training_step(model, batch.to(device), optimizer, grad_clip_val) for batch in loader]
    return sum(losses) / len(losses)


# --------------------------------------------------------------------------------------------- prediction
@torch.no_grad()
def predict_step(model: D2LStyleSeq2Seq, src: Tensor, src_valid_lens: Tensor, bos: int, num_steps: int
                 ) -> Tensor:
    """d2l's Seq2Seq.predict_step: greedy for a batch, always num_steps steps (even after every <eos>).

    src: (batch_size, num_steps) long; returns token ids (batch_size, num_steps), <eos> and what follows it
    included (cut them with `cut_at_eos`).
    """
    model.eval()
    enc = model.encoder(src, src_valid_lens)
    dec_state = model.decoder.init_state((enc.outputs, enc.state), src_valid_lens)
    outputs = [torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)]
    for _ in range(num_steps):
        Y, dec_state = model.decoder(outputs[-1], dec_state)
        outputs.append(Y.argmax(2))
    return torch.cat(outputs[1:], 1)


@torch.no_grad()
def predict_seq2seq(model: D2LStyleSeq2Seq, src_ids: list[int], src_vocab: Vocab, tgt_vocab: Vocab,
                    num_steps: int) -> list[int]:
    """d2l's predict_seq2seq: one sentence (token ids, without <eos>), padded to num_steps, decoded greedily
    one step at a time up to num_steps steps or its <eos>. Returns the predicted ids without <eos>."""
    model.eval()
    device = next(model.parameters()).device
    src_tokens = src_ids + [src_vocab.eos]
    enc_valid_len = torch.tensor([len(src_tokens)], device=device)
    enc_X = torch.tensor([pad_or_trim(src_tokens, num_steps, src_vocab.pad)], dtype=torch.long, device=device)
    enc = model.encoder(enc_X, enc_valid_len)
    dec_state = model.decoder.init_state((enc.outputs, enc.state), enc_valid_len)
    dec_X = torch.tensor([[tgt_vocab.bos]], dtype=torch.long, device=device)
    output_seq = []
    for _ in range(num_steps):
        Y, dec_state = model.decoder(dec_X, dec_state)
        dec_X = Y.argmax(dim=2)
        pred = int(dec_X.squeeze(dim=0).item())
        if pred == tgt_vocab.eos:
            break
        output_seq.append(pred)
    return output_seq


def cut_at_eos(ids: Sequence[int], eos: int) -> list[int]:
    """The ids before the first <eos> (all of them if there is none)."""
    ids = list(ids)
    return ids[:ids.index(eos)] if eos in ids else ids
