"""Chapter 1's questions (masked softmax), each asked right before the cell that shows its answer."""

from attn_course_exercises.predict import Choice

QUESTIONS = (
    Choice(
        key="ch1.p1",
        prompt=(
            "A plain `torch.softmax(scores, dim=-1)` runs over the four key positions of each sentence "
            '(lengths 3, 1 and 4, padded to 4). How much of the attention of "I like tea" and "hello" lands '
            "on their `<pad>` positions?"
        ),
        options=(
            (
                "None: `<pad>` is not a real word, so it gets no weight",
                (
                    "Tempting, because padding is only a storage trick. But the softmax knows nothing about "
                    "it: a `<pad>` position has a key like any other, so it gets a score and a weight "
                    "exp(score) / sum, which is never 0. Even an all-zero `<pad>` embedding scores 0, and "
                    "exp(0) = 1."
                ),
            ),
            (
                "A little, under 5 %: padding means nothing, so it scores low",
                (
                    "Tempting if you expect a meaningless key to score low. Nothing makes it low: the score "
                    "is a dot product with whatever vector `<pad>` has, here a random one like every "
                    "word's, so a `<pad>` can outscore a real word."
                ),
            ),
            (
                'A real share, tens of percent; "we read a book" puts none there',
                (
                    "Every position gets exp(score) > 0, padding included, so each padded sentence leaks "
                    "weight onto its `<pad>` positions; with these random scores, more than 40 % for both. "
                    "The sentence without padding has nothing to leak onto."
                ),
            ),
            (
                "Exactly 1/4 at each position: untrained attention is uniform",
                (
                    "Tempting, because untrained attention is often close to uniform. But a softmax is "
                    "uniform only when the scores are equal, and these differ (random queries and "
                    "embeddings)."
                ),
            ),
        ),
        answer=2,
        reveal=(
            "The next cell prints each sentence's weight on `<pad>` and asserts that both padded sentences "
            "put more than 40 % there and the full one none."
        ),
    ),
    Choice(
        key="ch1.p2",
        prompt=(
            "Fill the padded scores with `-inf` before the softmax. A row whose valid length is 0 is then "
            "all `-inf`. What does `torch.softmax` return for that row?"
        ),
        options=(
            (
                "All zeros: exp(-inf) = 0 at every position",
                (
                    "Tempting: it is the answer we want, and exp(-inf) is 0. But the softmax first "
                    "subtracts the row's maximum, which is -inf, and -inf - (-inf) is NaN. Even without "
                    "that step, 0 / 0 is NaN."
                ),
            ),
            (
                "0.25 each: four equal scores give a uniform row",
                (
                    "Tempting: four equal finite scores do give 0.25 each (a finite fill value does exactly "
                    "that, as the cells below show). But -inf minus itself is not 0: the equal scores give "
                    "NaN."
                ),
            ),
            (
                "NaN at every position",
                (
                    "The softmax computes exp(x - max) / sum; with max = -inf every x - max is -inf - "
                    "(-inf) = NaN. The NaN then spreads to the context vector and to the loss."
                ),
            ),
            (
                "An error: PyTorch refuses a row of -inf",
                (
                    "Tempting, since the result is meaningless; but PyTorch raises nothing and returns the "
                    "NaNs silently, which is why this bug reaches the loss before anyone sees it."
                ),
            ),
        ),
        answer=2,
        reveal="The next cell softmaxes a row of four `-inf` and asserts the result is all NaN.",
    ),
    Choice(
        key="ch1.p3",
        prompt=(
            "d2l's `masked_softmax` fills padded scores with -10⁶ (not `-inf`) and does nothing else. In "
            "float32, what weights does it give a sentence of valid length 0 over 4 keys?"
        ),
        options=(
            (
                "All zeros, the right answer: -10⁶ works as well as -inf",
                (
                    "Tempting, since exp(-10⁶) is 0 in float32. But all four scores are -10⁶; the softmax "
                    "subtracts their maximum, -10⁶, and every shifted score is 0: exp(0) = 1 at each "
                    "position."
                ),
            ),
            (
                "0.25 each: four equal scores make a uniform row",
                (
                    "After masking the row holds four copies of -10⁶: equal scores, so the weight is spread "
                    "evenly over four `<pad>` positions. Finite, but wrong: an empty sentence should attend "
                    "to nothing."
                ),
            ),
            (
                "NaN, as with -inf",
                (
                    "Tempting after the last cell; but -10⁶ is a finite float32, so -10⁶ - (-10⁶) = 0, not "
                    "NaN. (In float16 that changes: see the next question.)"
                ),
            ),
            (
                "The unmasked softmax: with nothing valid, d2l leaves the row alone",
                (
                    "Tempting if you picture a guard for empty rows; d2l has none. It masks all four "
                    "positions, as the valid length 0 says."
                ),
            ),
        ),
        answer=1,
        reveal=(
            "The next cell runs d2l's function and ours on a batch whose first sentence is empty, and "
            "asserts d2l's empty row is 0.25 everywhere and ours 0."
        ),
    ),
    Choice(
        key="ch1.p4",
        prompt=(
            "The same empty row, but the scores are float16, as in mixed-precision training. What does "
            "d2l's `masked_softmax` give it now?"
        ),
        options=(
            (
                "0.25 each, as in float32: the dtype does not change the arithmetic",
                (
                    "Tempting, and true in bfloat16, which has float32's range. But the largest float16 "
                    "magnitude is 65504: -10⁶ rounds to -inf when it is written into a float16 tensor."
                ),
            ),
            (
                "NaN at every position",
                (
                    "In float16, -10⁶ becomes -inf, so the empty row is all -inf: the NaN of two cells ago. "
                    "One empty sentence makes its context NaN, and with it the loss of the whole batch."
                ),
            ),
            (
                "All zeros: exp(-10⁶) underflows to 0 in float16",
                (
                    "exp does underflow to 0, but the softmax subtracts the row's maximum first, and that "
                    "maximum is itself -inf here."
                ),
            ),
            (
                "An overflow error when -10⁶ is cast to float16",
                (
                    "Tempting, since the number does not fit; but a cast to float16 turns an out-of-range "
                    "value into ±inf silently, with no error and no warning."
                ),
            ),
        ),
        answer=1,
        reveal=(
            "The next cell prints -10⁶ as float16 and as bfloat16 and d2l's empty row in both, and asserts "
            "NaN in float16 and 0.25 in bfloat16."
        ),
    ),
    Choice(
        key="ch1.p5",
        prompt=(
            "Copied from time-first code, `torch.softmax(scores, dim=0)` runs on our batch-first scores of "
            "shape (3, 1, 4): (sentences, queries, keys). Which sums of the result are exactly 1?"
        ),
        options=(
            (
                "Each sentence's weights over its 4 keys, as attention needs",
                (
                    "Tempting: a softmax's output 'sums to 1', and every shape is right. But it sums to 1 "
                    "along the axis you name, and dim=0 is the batch: the rows over keys now sum to "
                    "anything."
                ),
            ),
            (
                "For each key position, the weights of the 3 sentences",
                (
                    "dim=0 normalises along the batch: at each (query, key) position the three sentences' "
                    "weights sum to 1, so a weight compares a sentence with its batch-mates, which means "
                    "nothing. No shape check catches it; a sum check does."
                ),
            ),
            (
                "None: the softmax fails, since the batch has 3 entries and the keys 4",
                (
                    "A softmax works along any axis of any size and keeps the shape, so nothing fails; that "
                    "is what makes this mistake silent."
                ),
            ),
            (
                "The whole tensor's 12 weights together",
                (
                    "That would be a softmax over the flattened tensor. A softmax along one axis makes each "
                    "slice along that axis sum to 1, so here the whole tensor sums to 4, one per key "
                    "position."
                ),
            ),
        ),
        answer=1,
        reveal=(
            "The next cell prints the sums over the keys and over the batch, and asserts those over the "
            "batch are 1 and those over the keys are not."
        ),
    ),
    Choice(
        key="ch1.p6",
        prompt=(
            "A loss is backpropagated through `masked_softmax` (fill with the lowest finite value, softmax, "
            "multiply by the mask). What gradient does a padded score get?"
        ),
        options=(
            (
                "Exactly 0",
                (
                    "`masked_fill` replaces each padded score by a constant, so the original score does not "
                    "reach the output at all: its gradient is exactly 0, in empty rows too. Padding is "
                    "never trained."
                ),
            ),
            (
                "Tiny but not 0: the fill value is finite, so its exp is tiny, not zero",
                (
                    "Tempting, since we chose a finite fill value. But the gradient would have to flow "
                    "through the fill value back into the score it replaced, and `masked_fill` cuts that "
                    "path: a constant has no input to pass a gradient to."
                ),
            ),
            (
                "NaN in the row whose valid length is 0",
                (
                    "Tempting after the -inf story; but the fill is finite, so that row's softmax is finite "
                    "(uniform) before the mask zeroes it, and every gradient stays finite."
                ),
            ),
            (
                "As large as a real score's: the softmax couples every position of a row",
                (
                    "The softmax does couple the positions of a row, but what sits at a padded position is "
                    "the fill constant, not the score; the coupling reaches the constant and stops there."
                ),
            ),
        ),
        answer=0,
        reveal=(
            "The next cell backpropagates through `masked_softmax` with one empty query and asserts the "
            "gradient is exactly 0 at every masked position and finite everywhere."
        ),
    ),
)
