"""Chapter 5's questions (Luong attention), each asked right before the cell that shows its answer."""

from attn_course_exercises.predict import Choice, Number

QUESTIONS = (
    Choice(
        key="ch5.p1",
        prompt=(
            "Chapter 4 fed two different words y_{t-1} from the same decoder state and Bahdanau's attention "
            "did not move. Do the same with Luong's decoder: what happens to its attention weights a_t?"
        ),
        options=(
            (
                "Nothing: the state is the same, so the weights are the same",
                (
                    "That holds for Bahdanau, who scores with s_{t-1}, the state before the word is read. "
                    "Luong runs the RNN first: the query h_t = RNN([e(y_{t-1}); h̃_{t-1}], h_{t-1}) has "
                    "already read the word."
                ),
            ),
            (
                "They change: the query h_t has read the fed word",
                (
                    "Luong's step updates the state with y_{t-1} first and scores the annotations with the "
                    "result, so a different word gives a different query and different weights."
                ),
            ),
            (
                "They change, but only with input feeding",
                (
                    "Input feeding adds h̃_{t-1} to the RNN's input; the fed word is there with or without "
                    "it, and h_t reads it either way."
                ),
            ),
            (
                "The weights stay, the context changes",
                (
                    "The context is the weighted sum of the same annotations: it can only change if the "
                    "weights do."
                ),
            ),
        ),
        answer=1,
        reveal=(
            "The next cell feeds another word from the same state and asserts that the weights differ, "
            "printing by how much."
        ),
    ),
    Choice(
        key="ch5.p2",
        prompt=(
            "Build each of the four scores, attend once, then again with the keys (the annotations) "
            "replaced by random noise. Whose weights do not change?"
        ),
        options=(
            (
                "dot's: it has no parameters to be fooled",
                (
                    "No parameters, but qᵀk reads the keys directly: new keys, new scores. Having no "
                    "weights does not make a score blind to its input."
                ),
            ),
            (
                "general's: W_a maps the noise to the same place",
                (
                    "qᵀ W_a k is linear in k: noise in, different scores out. W_a is a fixed matrix, not a "
                    "filter."
                ),
            ),
            (
                "location's: a_t = softmax(W_a h_t) never reads a key",
                (
                    "The location score computes the weights from the query alone (eq. 8): it can learn "
                    "\"at step t look near position so and so\", but not look for a word. Replacing the "
                    "keys changes nothing."
                ),
            ),
            (
                "None: attention always depends on the keys",
                (
                    "Three of the four do, but Luong's location score is the exception: its weights come "
                    "from h_t only."
                ),
            ),
        ),
        answer=2,
        reveal=(
            "The next cell attends with each score on real and noisy keys and asserts that only location's "
            "weights are unchanged."
        ),
    ),
    Choice(
        key="ch5.p3",
        prompt=(
            "local-p takes the softmax of the scores inside its window, multiplies by the Gaussian "
            "exp(-(s - p_t)² / 2σ²) and, as in the paper, does not renormalise. What does one step's row of "
            "weights sum to?"
        ),
        options=(
            (
                "Exactly 1, like every attention row",
                (
                    "A softmax row sums to 1; multiplying each entry by a number below 1 makes the sum "
                    "smaller, and nothing scales it back up."
                ),
            ),
            (
                "At most 1, and below 1 in practice",
                (
                    "The Gaussian is 1 only at s = p_t and below 1 everywhere else, and p_t is a real "
                    "number, rarely a position: so every weight shrinks and the row sums to less than 1."
                ),
            ),
            (
                "More than 1: the Gaussian sharpens the peak",
                (
                    "It sharpens the shape, but by shrinking the weights away from p_t, never by raising "
                    "any: every factor is at most 1."
                ),
            ),
            (
                "0 outside the sentence, 1 inside it",
                (
                    "The window and the sentence's length decide which positions get weight, not what the "
                    "weights sum to."
                ),
            ),
        ),
        answer=1,
        reveal=(
            "The next cell prints the largest row sum of an untrained local-p decoder and asserts that no "
            "row exceeds 1 and some are below."
        ),
    ),
    Number(
        key="ch5.p4",
        prompt=(
            "The local-p model has half-width D = 3, and its p_t is a real number such as 8.37. In the "
            "middle of the sentence, how many source positions lie inside the window [p_t - 3, p_t + 3] and "
            "can get weight at one step?"
        ),
        answer=6,
        tolerance=0,
        why=(
            "The window is 2D = 6 positions wide, and an interval of width 6 whose ends are not whole "
            "numbers holds exactly 6 integers: [5.37, 11.37] holds 6, 7, 8, 9, 10 and 11. The tempting "
            "2D + 1 = 7 holds only when p_t is itself a whole number, as local-m's p_t = t always is. Near "
            "the ends of the sentence the window is cut shorter still."
        ),
        reveal=(
            "The next cell shows the stepper and asserts, at every step, weight exactly 0 outside the window "
            "and 6 positions inside it whenever the window lies within the sentence."
        ),
    ),
    Choice(
        key="ch5.p5",
        prompt=(
            "Global attention, local-m and local-p were each trained on the reversal task from three seeds. "
            "Which aligns best (the lowest alignment error rate) in every seed?"
        ),
        options=(
            (
                "local-p: it learned to move its window to the right word",
                (
                    "Tempting, since its window does find the word. But it multiplies the weights by a "
                    "Gaussian and cuts them at the window's edge, and its p_t is about a position off on "
                    "average: global attention, free to look anywhere, is sharper at the word itself."
                ),
            ),
            (
                "local-m: p_t = t is a sensible default",
                (
                    "On a reversal the gold position is n - 1 - t, not t: local-m's window sits on the wrong "
                    "diagonal and sees the right word only near the middle of the sentence."
                ),
            ),
            (
                "global: it may look anywhere",
                (
                    "With the whole source in view, global attention learns the anti-diagonal directly; "
                    "local-p has to predict p_t first, and pays for each error in it."
                ),
            ),
            (
                "They tie: the task is easy",
                (
                    "Easy for global attention and for local-p, but impossible for local-m, whose window "
                    "cannot reach the right word for most steps."
                ),
            ),
        ),
        answer=2,
        reveal=(
            "The next cell draws every seed's BLEU and alignment error rate and asserts that global aligns "
            "better than local-p in every seed, and local-m worst."
        ),
    ),
    Choice(
        key="ch5.p6",
        prompt=(
            "Luong's query h_t has just read y_{t-1}. To score step t's attention against the gold links, "
            "should it be credited to y_t, the word the step predicts, or to y_{t-1}, the word it was fed? "
            "Which reading gives the lower alignment error rate for these models?"
        ),
        options=(
            (
                "y_{t-1}, the input: the query has just read it, so it looks at its source",
                (
                    "Tempting, and the paper uses that reading for most scores. But the step needs the "
                    "source word of the word it must produce next, and that is where it looks."
                ),
            ),
            (
                "y_t, the output: the step looks at the source of the word it is about to produce",
                (
                    "Attention serves the prediction: to produce y_t the step fetches the source word y_t "
                    "translates. Credited to the fed word instead, the same weights are one word off almost "
                    "everywhere."
                ),
            ),
            (
                "It makes no difference: the two readings differ by one row",
                (
                    "One row is one word: on a mostly monotonic corpus, shifting every row by one moves "
                    "almost every link off its gold position."
                ),
            ),
            (
                "The output reading for Bahdanau, the input reading for Luong",
                (
                    "A natural guess from the queries, s_{t-1} vs h_t. But both decoders look at the source "
                    "of the word they predict."
                ),
            ),
        ),
        answer=1,
        reveal=(
            "The next cell prints every model's gap between the two readings and asserts that the output "
            "reading wins by more than 0.4 in every seed."
        ),
    ),
)
