"""Chapter 3's questions (the bottleneck), each asked right before the cell that shows its answer."""

from attn_course_exercises.predict import Choice

QUESTIONS = (
    Choice(
        key="ch3.p1",
        prompt=(
            "The next cell replaces the annotations h_1 … h_S (the encoder's `outputs`, one vector per "
            "source word) with random noise and runs the decoder without attention again. How many of its "
            "logits change?"
        ),
        options=(
            (
                "All of them: the annotations are what the encoder outputs, and the decoder decodes them",
                (
                    "Tempting, because `outputs` is what an encoder returns. But this decoder never reads "
                    "them: it reads c, which the bridge builds from the encoder's last states, and the "
                    "noise does not touch those."
                ),
            ),
            (
                "None: the decoder sees the source only through c",
                (
                    "c = tanh(W [h→_S; h←_1]) comes from the final states, kept apart from `outputs`, and c "
                    "is all this decoder reads. The per-word annotations are computed and thrown away: that "
                    "is the bottleneck, and chapter 4's attention is what reads them."
                ),
            ),
            (
                "Only the first step's: c starts the decoder, then the annotations take over",
                (
                    "Tempting if you picture the decoder turning to the annotations later; it never does. c "
                    "is fed to every step, and nothing else of the source."
                ),
            ),
            (
                "Those of the last few target words: c summarises the end of the sentence",
                (
                    "c is built from the forward state at the last word and the backward state at the "
                    "first, but those states reach the bridge directly; the annotations the cell replaces "
                    "are not on that path."
                ),
            ),
        ),
        answer=1,
        reveal=(
            "The next cell runs the decoder on the real and on the noisy annotations and asserts that the "
            "logits are identical."
        ),
    ),
    Choice(
        key="ch3.p2",
        prompt=(
            "Take the same 8 training pairs and append 10 more `<pad>` positions to every target. If the "
            "loss were a plain `.mean()` of the cross-entropy over every position, padding included (no "
            "mask), what would it do?"
        ),
        options=(
            (
                "Stay the same: cross-entropy skips `<pad>`",
                (
                    "Tempting, but `F.cross_entropy` skips a label only when told to (`ignore_index`); by "
                    "default `<pad>` is a label like any other, and the model is scored on predicting it."
                ),
            ),
            (
                "Fall: padded positions are easy, and dilute the mean",
                (
                    "That is what happens to a model trained without a mask: it learns to predict `<pad>` "
                    "after `<eos>`, which is easy and teaches it nothing about translation. This model was "
                    "trained with the mask and never learned to predict `<pad>`."
                ),
            ),
            (
                "Rise: every padded position costs a lot, and there are now more of them",
                (
                    "Trained with the masked loss, the model gives `<pad>` almost no probability, so each "
                    "padded position costs many nats, and 10 more of them per sentence pull the plain mean "
                    "up. The masked loss sums over the real tokens and divides by their number, so it does "
                    "not move at all."
                ),
            ),
            (
                "Change a little, at random: padding adds noise",
                (
                    "Nothing random happens: the same model reads the same inputs, with the padding after "
                    "each sentence, and a decoder reads left to right, so the real positions' predictions "
                    "do not change."
                ),
            ),
        ),
        answer=2,
        reveal=(
            "The next cell computes both losses on the batch as it is and with 10 more `<pad>` per target, "
            "and asserts that the masked loss is unchanged and the plain mean rises."
        ),
    ),
    Choice(
        key="ch3.p3",
        prompt=(
            "The next cell translates every test sentence and scores four bins of source length with corpus "
            "BLEU. The shortest sentences (3-9 tokens) score about 40. What will the longest (30-40 tokens) "
            "score?"
        ),
        options=(
            (
                "About the same: the model trained on as many long sentences as short ones",
                (
                    "Tempting, since the lengths are spread evenly over the training data. But seeing long "
                    "sentences does not help: everything the decoder knows about a sentence must fit into "
                    "c, 64 numbers, whatever its length."
                ),
            ),
            (
                "About three quarters of it: a gentle slope",
                (
                    "A gentle slope is what the attention model of chapter 4 shows. Without attention, c "
                    "has room for a short sentence, not for a long one."
                ),
            ),
            (
                "Less than a third of it",
                (
                    "A fixed-size c holds a short sentence well and a long one badly, and the decoder falls "
                    "back on fluent French that says something else. Bahdanau et al.'s Fig. 2 shows the "
                    "same fall for their RNNencdec."
                ),
            ),
            (
                "0: nothing of a long sentence survives",
                (
                    "Not nothing: some words and n-grams survive (the end of the chapter counts them), so "
                    "BLEU stays above 0."
                ),
            ),
        ),
        answer=2,
        reveal=(
            "The next cell prints BLEU for each length bin and asserts that the longest bin scores less "
            "than a third of the shortest."
        ),
    ),
    Choice(
        key="ch3.p4",
        prompt=(
            "Feed the decoder the correct prefix (teacher forcing), so that no earlier mistake can "
            "snowball, and count how often its most likely next word is right. Will that accuracy still "
            "fall from the shortest bin to the longest?"
        ),
        options=(
            (
                "No, it stays flat: long sentences suffered only from snowballing mistakes",
                (
                    "Tempting: the snowball argument is sound for greedy decoding, and this measurement "
                    "removes the snowball. But the accuracy falls anyway, so something else holds long "
                    "sentences back."
                ),
            ),
            (
                "Yes, from each bin to the next, even with the correct prefix",
                (
                    "With the reference as prefix no mistake can snowball, yet each longer bin is predicted "
                    "worse: the decoder knows less of a longer source. The bottleneck is one explanation, "
                    "long sentences being harder per word another; chapter 4 tells them apart."
                ),
            ),
            (
                "It rises: a longer prefix gives the decoder more to go on",
                (
                    "A longer prefix does help the decoder's model of French, but which word comes next "
                    "depends on the source, and of a long source c holds less."
                ),
            ),
        ),
        answer=1,
        reveal=(
            "The next cell prints the next-word accuracy of each bin and asserts that it falls from each "
            "bin to the next."
        ),
    ),
)
