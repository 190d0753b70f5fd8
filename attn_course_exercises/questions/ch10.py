"""Chapter 10's predict-then-see questions: entropy against concentration, the ReLU score, dropout."""

from attn_course_exercises.predict import Choice

QUESTIONS = (
    Choice(
        key="ch10.p1",
        prompt=(
            "The lazy pattern sends every decoder step, whatever word it produces, entirely to `<eos>`. What "
            "is its mean normalised entropy?"
        ),
        options=[
            (
                "0, the same as the diagonal",
                "Entropy reads each row on its own, and every lazy row is one-hot, just like every diagonal "
                "row. That they are all one-hot on the same column is invisible to it; the concentration, "
                "which adds up the columns, is what tells lazy from diagonal (1 against 0.2).",
            ),
            (
                "1, the same as the uniform pattern",
                "Tempting: a model that ignores which word it translates sounds as undecided as a uniform "
                "one. But entropy measures how spread out each row is, not whether the row is useful, and a "
                "row with all its weight on `<eos>` is as decided as a row can be.",
            ),
            (
                "0.2, that is 1/S",
                "That is a concentration, not an entropy: the diagonal's and the uniform pattern's "
                "concentration, the largest share of the attention any one column receives.",
            ),
            (
                "About 0.5: it looks at one word, but always the wrong one",
                "Entropy knows nothing about right or wrong words: it has no gold links, only the weights. "
                "One-hot rows give exactly 0, whichever word they sit on.",
            ),
        ],
        answer=0,
        reveal="The next cell prints each pattern's mean normalised entropy and concentration.",
    ),
    Choice(
        key="ch10.p2",
        prompt=(
            "As the healthy model trains, its attention's normalised entropy falls from 1 (uniform) epoch by "
            "epoch. What does its mean concentration do?"
        ),
        options=[
            (
                "It falls with the entropy: both measure how spread out the attention is",
                "Tempting, but the two read different things: entropy reads each row, concentration the "
                "columns. Uniform rows already give the lowest concentration possible, about 1/S, so it has "
                "nowhere to fall.",
            ),
            (
                "It rises towards 1: sharper weights pile up on one word",
                "Tempting if sharp and lazy sound alike. Sharp rows pile up on one word only if they all "
                "pick the same word; a model that learns to look sends different steps to different words.",
            ),
            (
                "It rises from about 1/S, but stays well below the collapse threshold of 0.6",
                "Each step learns to look at a few words, and some words share a column (an article and its "
                "noun, the full stop and the last word), so the largest column grows to a few times its "
                "fair share 1/S; the mass moves along the sentence instead of piling up.",
            ),
            (
                "It stays at 1/S: concentration only moves for a lazy model",
                "Exactly 1/S needs every column to receive the same attention, which a model that aligns "
                "only partly does not give: some columns take two or three words' steps.",
            ),
        ],
        answer=2,
        reveal=(
            "The next cell trains the healthy model and prints its entropy and concentration after each "
            "epoch."
        ),
    ),
    Choice(
        key="ch10.p3",
        prompt=(
            "The folklore: a ReLU in the additive score cuts negative values to 0, so many positions get "
            "zero attention. In a freshly built model with the ReLU score, what is the smallest weight on a "
            "real (not padded) source position?"
        ),
        options=[
            (
                "Exactly 0, on many positions",
                "The folklore's picture, and wrong in two places: the ReLU acts on the hidden features "
                "before `w_v`, not on the scores, and even a score of 0, or a very negative one, gives a "
                "positive weight after the softmax. Only the mask puts an exact 0 there, on padding.",
            ),
            (
                "Above 0 on every real position, near 1/S: near-uniform, like tanh",
                "A softmax of finite scores is never 0, and with small random weights the scores of one "
                "step lie close together, whatever the nonlinearity, so the weights start near uniform.",
            ),
            (
                "Negative on some positions: the ReLU's zeros pull them below the others",
                "Weights come out of a softmax, which gives positive numbers that sum to 1; no score, "
                "however low, makes a weight negative.",
            ),
        ],
        answer=1,
        reveal="The next cell builds a ReLU model and prints its smallest weight on a real position.",
    ),
    Choice(
        key="ch10.p4",
        prompt=(
            "In each of the study's five seeds, the ReLU model's BLEU turns out higher than the tanh model's "
            "of the same seed. What does the interval of the mean difference (widened for the chapter's "
            "twelve questions) say?"
        ),
        options=[
            (
                "ReLU is better: five seeds of five agree",
                "Tempting, but five of five happens by chance 2 times in 32 (sign test p = 0.0625) even if "
                "the score made no difference, and the interval reads the sizes too.",
            ),
            (
                "No verdict: the differences are so uneven that the interval reaches below 0",
                "The gains range from about 1 to 11 BLEU, and with so large a spread among five seeds the "
                "interval of their mean runs from below 0 to far above. The ReLU is not shown better, and "
                "not shown worse either.",
            ),
            (
                "Tanh is better: the ReLU's gains are within the tanh models' own spread",
                "Within the noise means no verdict, not the opposite verdict: nothing here points towards "
                "tanh.",
            ),
        ],
        answer=1,
        reveal="The next cell prints each seed's paired differences and the interval of their mean.",
    ),
    Choice(
        key="ch10.p5",
        prompt=(
            "The healthy model of each seed trains again with dropout p = 0.1, 0.3 and 0.5 on its attention "
            "weights, and is measured in evaluation mode. Compared with its partner without dropout, how "
            "does its attention's normalised entropy change?"
        ),
        options=[
            (
                "It falls: dropout forces the model to commit to the positions that matter",
                "The advice the section tests, and the direction one can argue for. But a step that puts "
                "all its weight on one position loses its whole context whenever that weight is dropped, so "
                "training pushes the model to hedge.",
            ),
            (
                "It rises at every p: the attention becomes more diffuse",
                "In every seed and at every p the entropy rose, each interval clear of 0, and at p = 0.5 "
                "every model ended above 0.75, near the near-uniform threshold.",
            ),
            (
                "No clear change: dropout acts in training only, and the weights are measured in evaluation "
                "mode",
                "True that the measured weights are undropped, but they are the weights the model learned "
                "while being trained with dropout, and that training shapes them.",
            ),
        ],
        answer=1,
        reveal=(
            "The next cell prints each dropout's paired differences and their intervals, measure by measure."
        ),
    ),
)
