"""Measuring a model: BLEU and the alignment metrics, evaluation passes over a test set,
and the diagnostics of attention weights (entropy, crossings).
"""
