"""Chapter 6's questions (decoding), each asked right before the cell that shows its answer."""

from attn_course_exercises.predict import Choice

QUESTIONS = (
    Choice(
        key="ch6.p1",
        prompt=(
            "Decode the whole test set twice with greedy search: once as one padded batch, once one sentence "
            "at a time. How many translations differ between the two?"
        ),
        options=(
            (
                "None: every translation is the same",
                (
                    "The encoder packs each sentence to its own length, the attention masks the padding "
                    "(weight exactly 0), finished sentences leave the batch, and the default max_len counts "
                    "each sentence's own length: nothing a sentence computes depends on its neighbours."
                ),
            ),
            (
                "A few: the padding shifts the attention of the shorter sentences",
                (
                    "Tempting if the padding could take weight; but the masked softmax gives it exactly 0, "
                    "so the context, and the prediction, are those of the sentence alone."
                ),
            ),
            (
                "The sentences that never produce <eos>: in a batch they run to the longest sentence's limit",
                (
                    "That is what a limit taken from the padded width would do. The package's default, "
                    "2 S_i + 10, counts each sentence's own length S_i, so such a sentence is cut at the "
                    "same point alone and in a batch."
                ),
            ),
            (
                "Many: a batch is decoded with averaged statistics",
                (
                    "Nothing is averaged over the batch at inference: each row is its own sentence, and the "
                    "model is in evaluation mode (no dropout)."
                ),
            ),
        ),
        answer=0,
        reveal=(
            "The next cell times both and asserts that every translation is the same and every score equal "
            "to rounding."
        ),
    ),
    Choice(
        key="ch6.p2",
        prompt=(
            "Run beam search with beam size K = 1 on every test sentence, with the default length "
            "normalisation (alpha = 0.75). Compared with greedy search's translations?"
        ),
        options=(
            (
                "The same translations and the same scores",
                (
                    "With one beam, each step extends the only prefix by every token and keeps the best "
                    "continuation that does not end in <eos>; an <eos> among the K = 1 best finishes the "
                    "only hypothesis. That is greedy search's argmax, step for step. Length normalisation "
                    "ranks finished hypotheses, and there is only one."
                ),
            ),
            (
                "Slightly longer: the length normalisation rewards length",
                (
                    "Normalisation only ranks hypotheses against each other; a beam of one never holds two "
                    "to rank."
                ),
            ),
            (
                "Better: beam search is a better search even with one beam",
                (
                    "With K = 1 it keeps exactly what greedy search keeps: the single most likely "
                    "continuation at each step."
                ),
            ),
            (
                "Different wherever the best token is <eos>: beam search sets it aside and goes on",
                (
                    "An <eos> among the K best is set aside as finished, and with K = 1 the sentence then "
                    "has its K finished hypotheses and stops, as greedy search stops at <eos>."
                ),
            ),
        ),
        answer=0,
        reveal=(
            "The next cell decodes the test set both ways and asserts that the tokens are the same and the "
            "scores equal."
        ),
    ),
    Choice(
        key="ch6.p3",
        prompt=(
            "At the first step all K beams hold the same prefix, <bos>. Which beams do the 2K candidates of "
            "that step extend?"
        ),
        options=(
            (
                "Two candidates from each beam",
                (
                    "Tempting, since there are K beams and 2K candidates. But equal beams would give equal "
                    "candidates: K copies of the same best token."
                ),
            ),
            (
                "Beam 0 only: the other beams start with log P = -inf",
                (
                    "Only row 0 starts with score 0; the others start at -inf, so all of their "
                    "continuations rank last. The first step thus picks 2K different tokens from the one "
                    "real prefix, and from step 2 on every beam is different."
                ),
            ),
            (
                "All K beams, K times the same best continuation",
                (
                    "That is what happens if every row starts with score 0: the beams would stay copies of "
                    "each other, and the search would be greedy search K times."
                ),
            ),
            (
                "None: the first step only sets up the beams",
                (
                    "The first step predicts the first word like any other; the beams are set up before it, "
                    "as K rows of <bos>."
                ),
            ),
        ),
        answer=1,
        reveal=(
            "The next cell shows the stepper and asserts that every candidate of the first step extends beam "
            "0, that every step keeps K continuations, and that the final choice is beam_search's."
        ),
    ),
    Choice(
        key="ch6.p4",
        prompt=(
            "Beam search of width 4 over the test set, with alpha = 0, 0.5, 1, 1.5 and 2 in lp(L) = L^alpha. "
            "As alpha grows, what happens to the mean length of the translations?"
        ),
        options=(
            (
                "It grows: dividing log P by a larger lp(L) forgives long hypotheses more",
                (
                    "Every token adds a negative log-probability, so raw log P favours stopping early; "
                    "dividing by L^alpha shrinks a long hypothesis' score the most, and the larger alpha, "
                    "the more longer hypotheses win."
                ),
            ),
            (
                "It shrinks: the penalty punishes length",
                (
                    "Tempting from the name, but lp(L) divides a negative score: a larger divisor brings a "
                    "long hypothesis' score closer to 0, which helps it."
                ),
            ),
            (
                "It stays: normalisation only reorders hypotheses of equal length",
                (
                    "Hypotheses of equal length share lp(L), so their order does not change; but between "
                    "lengths it does, and that is what alpha is for."
                ),
            ),
            (
                "It grows without bound: the search stops producing <eos>",
                (
                    "The search still sets hypotheses aside at <eos> and stops when K have finished; alpha "
                    "only changes which of them wins."
                ),
            ),
        ),
        answer=0,
        reveal=(
            "The next cell prints the mean length for each alpha and asserts that alpha = 2 gives longer "
            "translations than alpha = 0, for both penalties."
        ),
    ),
)
