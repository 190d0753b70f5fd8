"""Chapter 9's predict-then-see questions: seed noise, exposure bias, clipping, temperature, and the tests."""

from attn_course_exercises.predict import Choice, Number

QUESTIONS = (
    Number(
        key="ch9.p1",
        prompt=(
            "The chapter's recipe was trained 12 times, changing nothing but the seed (initial weights, "
            "batch order, random draws). How many BLEU points lie between the worst and the best of the 12 "
            "test BLEUs?"
        ),
        answer=22.0,
        tolerance=7.0,
        why=(
            "The 12 seeds land between 65.8 and 87.8: 22 BLEU apart, with nothing changed but the luck of "
            "the start. A common guess is a point or two, because a single number looks precise when printed "
            "with a decimal; on a small model trained for a few seconds, the seed moves BLEU more than most "
            "of the changes this chapter tries. That is why one training of a variant, a few points above "
            "one training of the baseline, shows nothing."
        ),
        reveal="The next cell reads the 12 trainings and prints the lowest and highest test BLEU.",
        unit="BLEU",
    ),
    Choice(
        key="ch9.p2",
        prompt=(
            "The teacher-forced model predicts every test word twice: fed the reference's previous words, "
            "and fed its own previous guesses (as greedy decoding does). Over all test tokens, how do the "
            "two accuracies compare?"
        ),
        options=[
            (
                "Fed its own words, it is right less often",
                "After its first wrong word, every later step reads a prefix unlike any it was trained on, "
                "and errors pile up. This gap is exposure bias.",
            ),
            (
                "They are equal: same model, same weights",
                "Tempting, since nothing about the model changes. But its input does: at step t it reads "
                "either the reference's word or its own guess, and those differ as soon as it makes a "
                "mistake. They must agree only at position 0, where both read `<bos>`.",
            ),
            (
                "Fed its own words, it is right more often: they are what it expects",
                "Tempting if you picture the model as consistent with itself. But it was trained only on "
                "reference prefixes; its own guesses, wrong ones included, are inputs it never saw in "
                "training.",
            ),
        ],
        answer=0,
        reveal="The next cell plots both accuracies by target position and prints them over all test tokens.",
    ),
    Choice(
        key="ch9.p3",
        prompt=(
            "A second model trains with no clipping at all, and `train` records its gradient norm at every "
            "update. How does that norm evolve, and so when does the baseline's clipping at 1 act?"
        ),
        options=[
            (
                "Largest at the start, while the loss is highest: clipping acts in the first updates",
                "Tempting: a large loss sounds like a large gradient. But a freshly built model predicts "
                "almost uniformly, and the gradient of a near-uniform softmax with small weights is small; "
                "none of the study's 12 seeds had a first-epoch norm above 1.",
            ),
            (
                "It grows as the model learns: clipping acts mostly in later updates",
                "As the predictions sharpen, the gradients grow several-fold, and a threshold of 1 then "
                "rescales a large share of the late updates.",
            ),
            (
                "It stays below 1 throughout: clipping at 1 never acts",
                "Tempting if clipping is pictured as a guard that only rare explosions trip. Here the norm "
                "crosses 1 in a large share of the updates, as the next cell counts.",
            ),
            (
                "It explodes within a few updates: without clipping, training diverges",
                "The fear clipping was invented for (Pascanu et al. 2013), but exploding gradients are rare "
                "events, not the rule: this small GRU trains without clipping, and ends lower (section 8).",
            ),
        ],
        answer=1,
        reveal="The next cell plots both models' gradient norms update by update, with the threshold of 1.",
    ),
    Choice(
        key="ch9.p4",
        prompt=(
            "The same model trains with `attention_temperature=4`: its weights are softmax(scores / 4). The "
            "alignment model could learn scores four times larger and undo it. After the chapter's 190 "
            "updates, how does the test attention's normalised entropy compare with the model trained at tau "
            "= 1?"
        ),
        options=[
            (
                "About the same: training learns larger scores and undoes the temperature",
                "Possible in principle, and the reason the question is worth asking. But the scores would "
                "have to grow four-fold, and 190 updates of Adam at this rate do not get them there.",
            ),
            (
                "Higher: the weights stay flatter than at tau = 1",
                "The temperature acts as a knob on how peaked the attention becomes, and tau = 0.25 moves "
                "it the other way. Flatter weights here also cost BLEU (section 8).",
            ),
            (
                "Lower: a hot softmax pushes the model to learn sharper scores, and it overshoots",
                "Tempting if you expect training to fight the temperature and overshoot. Within this "
                "training it does not even catch up.",
            ),
        ],
        answer=1,
        reveal="The next cell trains tau = 0.25 and tau = 4 and prints each model's normalised entropy.",
    ),
    Choice(
        key="ch9.p5",
        prompt=(
            "On each of the first five seeds (0 to 4), tau = 4 gave a lower BLEU than tau = 1, by 8 to 19 "
            "points. Which test calls that an effect at the 95 % level?"
        ),
        options=[
            (
                "Both the sign test and the paired t-test",
                "Tempting, since every seed agrees. But the sign test reads only the five signs, and five "
                "of five happens 2 times in 32 (p = 0.0625) even if the change did nothing.",
            ),
            (
                "The sign test only",
                "The sign test is the one that can never pass with five seeds: its smallest p-value for "
                "five is 0.0625, above 0.05.",
            ),
            (
                "The paired t-test only",
                "The t-test also reads the sizes, and differences of 8 to 19 points, large against their "
                "own spread, put the whole interval below 0. The sign test cannot get below 0.0625 with "
                "five seeds.",
            ),
            (
                "Neither: five seeds are too few for any test",
                "Tempting after the sign test's verdict, but too few for counting signs is not too few for "
                "weighing sizes: with large, steady differences the t interval clears 0 at five seeds.",
            ),
        ],
        answer=2,
        reveal="The next cell computes the sign test and the t interval for seeds 0 to 4, then for all 12.",
    ),
    Choice(
        key="ch9.p6",
        prompt=(
            "Four differences the study found, each with how many of the 12 seeds point its way. Which one "
            "does the chapter's standard (a question named before looking, whose 99.75 % interval clears 0) "
            "call an effect?"
        ),
        options=[
            (
                "A coin per sentence shrinks the exposure gap (11 of 12 seeds)",
                "Tempting: 11 of 12, and asked alone its t-test gives p = 0.006. But the gap moved by only "
                "0.017, against a seeds' spread of 0.022, and among twenty questions its interval reaches "
                "past 0: a lean, not a finding.",
            ),
            (
                "No clipping raises BLEU (9 of 12 seeds; seeds 0 to 4 alone: 4 of 5)",
                "Tempting, especially from the first five seeds. But 9 of 12 happens by chance about one "
                "time in seven (sign test p = 0.15), and the BLEU differences are small against the seeds' "
                "spread of about 7 points.",
            ),
            (
                "Tau = 4 lowers BLEU (12 of 12 seeds, by about 21 points)",
                "Every seed agrees, and the differences are about three times the seeds' spread, so the "
                "interval stays below 0 even widened for twenty questions.",
            ),
            (
                "Orthogonal initialisation raises the early rise of the loss (11 of 12 seeds)",
                "Tempting, with the same 11 of 12 as warm-up's real effect. But nobody asked it before "
                "looking: it is one of 30 rows kept for exploring, and among 30 unasked rows one this "
                "lopsided turns up by chance. A reason for new seeds, not a finding.",
            ),
        ],
        answer=2,
        reveal="The next cell draws every seed's difference and the 20 intervals, coloured by their verdict.",
    ),
)
