"""Where the course teaches each exercise's point: the chapter notebook and the section heading to re-read.

The class report sends a teacher (and a student) from a mistake to this section. The headings are the
chapters' own; a test checks that each one is still in its notebook.
"""

from __future__ import annotations

#: {exercise key: (chapter notebook under notebooks/, section heading without its "## ")}.
SECTIONS: dict[str, tuple[str, str]] = {
    "ch1.q1": ("01_masked_softmax.ipynb", "3. `sequence_mask`: which positions are real"),
    "ch1.q2": ("01_masked_softmax.ipynb", "4. `masked_softmax`, one step at a time"),
    "ch1.q3": ("01_masked_softmax.ipynb", "1. Attention as a soft lookup"),
    "ch2.q1": ("02_scoring_functions.ipynb", "3. Scaled dot product"),
    "ch2.q2": ("02_scoring_functions.ipynb", "9. Projecting the keys once"),
    "ch2.q3": ("02_scoring_functions.ipynb", "5. Luong's scores (Luong, Pham & Manning 2015)"),
    "ch2.q4": ("02_scoring_functions.ipynb", "5. Luong's scores (Luong, Pham & Manning 2015)"),
    "ch2.q5": ("02_scoring_functions.ipynb", "7. The package versions, and d2l's"),
    "ch3.q1": ("03_seq2seq_bottleneck.ipynb", "3. Training"),
    "ch3.q2": ("03_seq2seq_bottleneck.ipynb", "2. The model: everything goes through $c$"),
    "ch3.q3": ("03_seq2seq_bottleneck.ipynb", "The encoder and its bridge, written out"),
    "ch4.q1": ("04_bahdanau_attention.ipynb", "1. One decoder step, from the equations"),
    "ch4.q2": ("04_bahdanau_attention.ipynb", "3. What did it learn to look at?"),
    "ch5.q1": ("05_luong_attention.ipynb", "2. Four scores"),
    "ch5.q2": ("05_luong_attention.ipynb", "3. Input feeding, and what it costs"),
    "ch5.q3": ("05_luong_attention.ipynb", "Local-m and local-p, written out"),
    "ch5.q4": ("05_luong_attention.ipynb", "4. Local attention"),
    "ch6.q1": ("06_decoding.ipynb", "3. Stop every sentence at its own `<eos>`"),
    "ch6.q2": ("06_decoding.ipynb", "Beam search in about 40 lines"),
    "ch6.q3": ("06_decoding.ipynb", "5. Beam search"),
    "ch9.q1": ("09_training_dynamics.ipynb", "2. Exposure bias"),
    "ch9.q2": ("09_training_dynamics.ipynb", "3. Scheduled sampling"),
    "ch9.q3": ("09_training_dynamics.ipynb", "8. Real effect, or seed noise?"),
    "ch10.q1": ("10_diagnosing_attention.ipynb", "1. Two numbers for a sentence's attention"),
    "ch10.q2": ("10_diagnosing_attention.ipynb", "1. Two numbers for a sentence's attention"),
    "ch10.q3": ("10_diagnosing_attention.ipynb", "4. Two broken models, caught by the numbers"),
    "ch10.q4": ("10_diagnosing_attention.ipynb", "1. Two numbers for a sentence's attention"),
    "ch11.q1": ("11_self_attention.ipynb", "The causal mask"),
    "ch11.q2": ("11_self_attention.ipynb", "2. Multi-head attention"),
    "ch12.q1": ("12_real_sentences.ipynb", "4. Words change places"),
    "ch12.q2": ("12_real_sentences.ipynb", "4. Words change places"),
    "ch12.q3": ("12_real_sentences.ipynb", "Several right translations"),
}


def section(key: str) -> str:
    """Where exercise `key` is taught, in words: "notebooks/01_masked_softmax.ipynb, § 3. `sequence_mask`:
    which positions are real"; "" for an exercise the map does not know."""
    if key not in SECTIONS:
        return ""
    notebook, heading = SECTIONS[key]
    return f"notebooks/{notebook}, § {heading}"
