"""The attention mechanism: masks and the masked softmax, score functions, attention layers,
multi-head attention, positional encoding, kernel regression, and the fast forms chapter 8 measures.
"""
