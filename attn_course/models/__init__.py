"""Sequence-to-sequence models built from attention: encoders, decoders (plain, Bahdanau, Luong),
the Seq2Seq wrapper, the small Transformer, and greedy and beam search over them.
"""
