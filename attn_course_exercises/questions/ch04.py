"""Chapter 4's questions (Bahdanau attention), each asked right before the cell that shows its answer."""

from attn_course_exercises.predict import Choice

QUESTIONS = (
    Choice(
        key="ch4.p1",
        prompt=(
            "Take one decoder state s_{t-1} and run the step twice, feeding two different previous words "
            "y_{t-1}. What changes between the two runs?"
        ),
        options=(
            (
                "Both the attention weights and the prediction",
                (
                    "Tempting, since the fed word is an input of the step. But Bahdanau's step scores the "
                    "annotations with s_{t-1} before it reads y_{t-1}: the word enters only the GRU update "
                    "and the output layer, after the weights are fixed."
                ),
            ),
            (
                "The prediction only: the attention weights are identical",
                (
                    "The weights alpha_t = softmax(v_aᵀ tanh(W_a s_{t-1} + U_a h_j)) read only s_{t-1} and "
                    "the annotations, neither of which the fed word touches. The word does reach s_t and "
                    "the output layer, so the logits differ."
                ),
            ),
            (
                "The attention weights only: the prediction reads the context, not the word",
                (
                    "Backwards: the weights cannot move (s_{t-1} is the same), and the output layer reads "
                    "e(y_{t-1}) directly, besides s_t and c_t."
                ),
            ),
            (
                "Nothing: the step depends only on the state",
                (
                    "The state fixes where the step looks, but the fed word is read by the GRU and by the "
                    "output layer, so the prediction changes."
                ),
            ),
        ),
        answer=1,
        reveal=(
            "The next cell feeds another word from the same state and asserts that the weights are equal to "
            "the last digit and the logits are not."
        ),
    ),
    Choice(
        key="ch4.p2",
        prompt=(
            "Nobody showed the model which English word each French word translates. Over the whole test "
            "set, for what share of the French words does the attention peak on a gold-linked English word "
            "(crediting step t's attention to the word y_t it predicts)?"
        ),
        options=(
            (
                "About a quarter: training on translations alone gives no reason to align",
                (
                    "Tempting, since alignment was never a training target. But to predict y_t the decoder "
                    "needs the source word y_t translates, and the weights are how it fetches that word: "
                    "aligning is the cheapest way to lower the loss."
                ),
            ),
            (
                "About half: the attention is spread over several words",
                (
                    "A trained model's rows are far from spread out: most of a row's weight sits on one or "
                    "two words (the heatmap above), and the top one is usually the right one."
                ),
            ),
            (
                "Three in four or more",
                (
                    "The attention finds the word being translated for the large majority of target words, "
                    "crossings included; the misses are words whose peak lands on a neighbour of their gold "
                    "word, or whose gold word is ambiguous."
                ),
            ),
            (
                "Every one of them",
                (
                    "Close, but not all: some French words have no single English counterpart, and for "
                    "some the peak lands on a neighbour of the gold word (the cell above lists this "
                    "sentence's misses)."
                ),
            ),
        ),
        answer=2,
        reveal=(
            "The next cell scores the attention of every test sentence against the gold links and checks "
            "that the share is at least three in four, and prints the range measured on other seeds."
        ),
    ),
    Choice(
        key="ch4.p3",
        prompt=(
            "The stepper below shows one sentence as it sits in a batch with a longer one: two `<pad>` "
            "positions follow its `<eos>`. At every step, what happens to those two positions?"
        ),
        options=(
            (
                "They are never scored: the decoder knows the sentence's length",
                (
                    "Tempting, but the additive score runs over the whole padded batch at once: every "
                    "position gets a score, `<pad>` included. The length is used afterwards, by the mask."
                ),
            ),
            (
                "They are scored, then masked: weight exactly 0, the real words share all of it",
                (
                    "The masked softmax (chapter 1) replaces their scores by -inf before the softmax, so "
                    "their weight is exactly 0 and the weights of the real words, `<eos>` included, sum to "
                    "1. The context vector is therefore the same as without the padding."
                ),
            ),
            (
                "A small weight, which training has taught to be tiny",
                (
                    "That is what a plain softmax would give (chapter 1's first cell): some weight leaks "
                    "onto padding. The mask does not rely on training; it is exactly 0 even untrained."
                ),
            ),
            (
                "They take the weight the model does not need, like `<eos>`",
                (
                    "`<eos>` is a real position: the model may park weight there, and does. `<pad>` is not "
                    "part of the sentence, and the mask gives it nothing."
                ),
            ),
        ),
        answer=1,
        reveal=(
            "The next cell shows the stepper and asserts, at every step, weight 0 on both `<pad>` positions "
            "and weights summing to 1 on the real ones."
        ),
    ),
    Choice(
        key="ch4.p4",
        prompt=(
            "Chapter 3's model without attention lost most of its BLEU as the sentences grew. Bahdanau's "
            "model is trained on the same data with the same recipe. Where is its lead over that baseline "
            "smallest?"
        ),
        options=(
            (
                "On the shortest sentences, 3-9 tokens",
                (
                    "A short sentence fits in the baseline's single vector c, so attention has least to add "
                    "there; from 10 tokens on c is overloaded, while attention reads each annotation "
                    "directly, and the gap opens."
                ),
            ),
            (
                "On the longest sentences, 30-40 tokens",
                (
                    "Tempting, since long sentences are hard for every model. But the baseline has already "
                    "collapsed there, while attention holds up: the lead is large, not small."
                ),
            ),
            (
                "The same everywhere: attention helps every sentence equally",
                (
                    "Attention adds most where the fixed vector c runs out of room, and c has room for a "
                    "short sentence."
                ),
            ),
            (
                "Nowhere: on this toy corpus both models are near perfect",
                (
                    "Chapter 3 measured the baseline: its BLEU falls steeply with the length of the source. "
                    "The corpus is easy for attention, not for a single vector."
                ),
            ),
        ),
        answer=0,
        reveal=(
            "The next cell prints BLEU per length bin for both models and asserts that the lead is smallest "
            "on the shortest sentences."
        ),
    ),
)
