"""Benchmarks of the course's pipeline against the textbook (d2l-style) one: `python -m benchmarks.run`.

Modules: `d2l_style` (the reference pipeline, written as d2l writes it, with the same architecture and
weights as attn_course's Bahdanau model), `measure` (timers, interleaved A/B medians, peak memory,
machine info), `suites` (each benchmark as a function returning plain-Python results) and `run` (the
command line that runs them, prints a table and writes JSON to benchmarks/results/).
"""
