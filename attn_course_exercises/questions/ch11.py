"""Chapter 11's predict-then-see questions: path lengths, masks, order, a lead over seeds, and timing."""

from attn_course_exercises.predict import Choice, Number

QUESTIONS = (
    Number(
        key="ch11.p1",
        prompt=(
            "Stack convolutions of width k = 3 (padded, so every layer keeps 12 positions). How many layers "
            "does it take before output 12, the last, depends on input 1, the first?"
        ),
        answer=11,
        tolerance=0,
        why=(
            "A width-3 convolution lets each output see one neighbour on each side, so every layer widens "
            "the reach by (k - 1) / 2 = 1 position: 11 layers cross the 11 steps from the first position to "
            "the last. The tempting answer is 4, 12 / 3 read off the table's O(n/k): an order of growth "
            "hides its constants, and a width-3 convolution reaches (k - 1) / 2 = 1 new position per side "
            "per layer, not k. Width 5 needs 6 layers; self-attention needs 1."
        ),
        reveal="The next cell measures which inputs each output depends on, layer after layer.",
        unit="layers",
    ),
    Number(
        key="ch11.p2",
        prompt=(
            "Sentence 2 of the batch has 3 real tokens, padded to 5. With `causal=True`, on how many keys "
            "does its last query (position 4, a padding position) put some weight?"
        ),
        answer=3,
        tolerance=0,
        why=(
            "Query i may see min(valid_len, i + 1) keys: the causal mask allows 5, padding caps it at 3. The "
            "tempting 5 forgets the padding (a future key is masked, and so is a padded one). The tempting 0 "
            "assumes a padding query is switched off: masking works on keys, so a padding query gets a row "
            "of weights like any other, and the loss ignores its prediction instead."
        ),
        reveal="The next cell prints which keys each query of sentence 2 sees.",
        unit="keys",
    ),
    Choice(
        key="ch11.p3",
        prompt=(
            "Shuffle the 6 positions of a sentence and feed it through multi-head self-attention, no "
            "positional encoding added. Compared with the outputs of the sentence in its order, the outputs:"
        ),
        options=[
            (
                "are shuffled the same way, each value unchanged",
                "Each output is a weighted average over all positions, with weights from dot products that "
                "do not know where a vector sits. Moving a word moves its output with it and changes "
                "nothing else: self-attention is permutation equivariant.",
            ),
            (
                "are exactly the same, in the same order",
                "Tempting, from 'a bag of words': the set of outputs is the same, but output i belongs to "
                "query i, so it moves when its word moves.",
            ),
            (
                "change in value: each word now has other neighbours",
                "That is what an RNN or a convolution does, whose outputs depend on which vector comes "
                "before which. Self-attention has no notion of before: every position reads every other "
                "alike.",
            ),
        ],
        answer=0,
        reveal="The next cell shuffles a random sentence and compares the outputs, position by position.",
    ),
    Number(
        key="ch11.p4",
        prompt=(
            "Over five seeds, the Transformer's lead over Bahdanau's model averages about 20 BLEU, and "
            "varies from seed to seed with a standard deviation of about 9. How many standard errors above 0 "
            "is the mean lead?"
        ),
        answer=5.0,
        tolerance=0.5,
        why=(
            "The standard error of a mean of n values is s / sqrt(n) = 9 / sqrt(5), about 4, so the mean "
            "lies 20 / 4 = 5 standard errors above 0: far more than seed-to-seed noise explains. The usual "
            "slip is 20 / 9, about 2.2: the standard deviation is the yardstick for one seed's lead, not for "
            "the mean of five. Dividing by n instead of sqrt(n) (20 / 1.8, about 11) overstates it."
        ),
        reveal="The next cell computes the mean lead, its spread between seeds and its standard error.",
        unit="standard errors",
    ),
    Choice(
        key="ch11.p5",
        prompt=(
            "One training step of each model, on batches of 3-6-token and of 21-30-token sentences, on the "
            "CPU. How does the ratio of their step times, Bahdanau's over the Transformer's, change from the "
            "short batches to the long ones?"
        ),
        options=[
            (
                "It shrinks: the Transformer's self-attention costs T x T per head, Bahdanau's only T steps",
                "Tempting from the complexity table, where attention's cost is quadratic in length. But on "
                "sentences this short that term does not dominate: Bahdanau's T steps, each a handful of "
                "small operations run one after the other, cost mostly their fixed overhead (chapter 8), "
                "and those add up faster.",
            ),
            (
                "It grows: Bahdanau's time grows faster with length than the Transformer's",
                "Each extra target word adds one more sequential step to Bahdanau's decoder, while the "
                "Transformer's extra positions make its few large operations larger, not more numerous. The "
                "Transformer's time grows too (every layer works on all T positions), just more slowly.",
            ),
            (
                "It stays about the same: both do work proportional to the number of words",
                "Both do, roughly, but not at the same price per word: a word costs the RNN a whole "
                "sequential step and the Transformer a row of a larger matrix product.",
            ),
        ],
        answer=1,
        reveal="The next cell times one training step of each model on four length bins, seven rounds each.",
    ),
    Choice(
        key="ch11.p6",
        prompt=(
            "The next cell draws the last layer's three attentions: the encoder's self-attention, the "
            "decoder's self-attention and the cross-attention. One of them is empty above its diagonal "
            "whatever weights the model learns. Which?"
        ),
        options=[
            (
                "The encoder's self-attention",
                "The encoder reads a source sentence that is all there from the start, so each source word "
                "may read the words after it: its padding mask hides only padding.",
            ),
            (
                "The decoder's self-attention",
                "The causal mask lets the step that predicts word t read only `<bos>` and the words before "
                "it, so every key after the query is masked, for any weights. Without it, training would "
                "let each step copy the word it must predict.",
            ),
            (
                "The cross-attention",
                "Tempting, since the cross-attention belongs to the decoder. But it reads the source, all "
                "of which is known before the first target word; its rows and columns are different "
                "sentences, so its diagonal means nothing special.",
            ),
            (
                "None: a triangle appears only if the model learns to look back",
                "A learned pattern could come and go with the seed; this one is a mask, set before "
                "training, and holds exactly.",
            ),
        ],
        answer=1,
        reveal="The next cell asserts which triangle is empty and draws the three attentions side by side.",
    ),
)
