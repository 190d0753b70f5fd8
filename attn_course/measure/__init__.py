"""Measuring a model: BLEU and the alignment metrics, evaluation passes over a test set,
the diagnostics of attention weights (entropy, crossings), and whether a difference over seeds is real
(significance).
"""
