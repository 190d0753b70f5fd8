"""Chapter 2's questions (scoring functions), each asked right before the cell that shows its answer."""

from attn_course_exercises.predict import Choice

QUESTIONS = (
    Choice(
        key="ch2.p1",
        prompt=(
            "1,000 random queries, each scored against 10 random keys with the unscaled dot product qᵀk, "
            "every component drawn from N(0, 1), at d = 1024. On average, how much of the softmax weight "
            "goes to the largest of the ten scores?"
        ),
        options=(
            (
                "About 0.1: random keys are unrelated to the query, so the weights are near uniform",
                (
                    "Tempting: no key matches better on average. But each score is a sum of 1024 random "
                    "products, with a standard deviation of √1024 = 32, so two keys' scores typically "
                    "differ by tens, and a gap of tens is a factor of millions after exp."
                ),
            ),
            (
                "About 0.3, whatever d is",
                (
                    "That is the scaled score (the next cell shows it): dividing by √d keeps the variance "
                    "of the scores at 1 for every d. Unscaled, their spread grows like √d."
                ),
            ),
            (
                "Above 0.9: the softmax is nearly one-hot",
                (
                    "qᵀk has variance d = 1024, so the scores spread over tens of units and the largest "
                    "takes almost all the weight. A saturated softmax has a Jacobian, and so a gradient, "
                    "near 0: that is why Vaswani et al. divide by √d."
                ),
            ),
            (
                "Exactly 1.0: the other nine underflow to 0",
                (
                    "Nearly, but not exactly: now and then two keys score within a few units of each other "
                    "and share the weight, so the average stays a little below 1."
                ),
            ),
        ),
        answer=2,
        reveal=(
            "The next cell prints, for d from 4 to 1024, the variance of the scores and the average largest "
            "weight, unscaled and scaled, and asserts that unscaled at d = 1024 it is above 0.95."
        ),
    ),
    Choice(
        key="ch2.p2",
        prompt=(
            "The additive layer has just been built with PyTorch's default initialisation and never "
            "trained. On the toy pair, how is each English word's weight spread over the French words?"
        ),
        options=(
            (
                "Already on its translation: a word and its translation have similar vectors",
                (
                    "Tempting, since the dot product found the alignment without training. But the additive "
                    "score first sends queries and keys through random matrices W_q and W_k and adds them; "
                    "random projections keep no trace of which vectors were similar."
                ),
            ),
            (
                "Close to uniform: every weight within a factor 1.5 of 1/n",
                (
                    "w_v is small at initialisation and tanh squashes the features, so all the scores lie "
                    "close together, and close scores give nearly equal weights. That is the expected "
                    "start, not a bug."
                ),
            ),
            (
                "Peaked on some random French word: random weights, random preferences",
                (
                    "Random weights do give random preferences, but weak ones: with a small w_v the scores "
                    "differ by a fraction of a unit, far too little to peak a softmax."
                ),
            ),
            (
                "Zero on every word until the layer is trained",
                (
                    "A softmax of finite scores is positive everywhere and each row sums to 1; only the "
                    "mask makes zeros (at the `<pad>` of the shorter sentence)."
                ),
            ),
        ),
        answer=1,
        reveal=(
            "The next cell prints the first word's weights in both sentences and asserts that every weight "
            "lies between 0.5/n and 1.5/n."
        ),
    ),
    Choice(
        key="ch2.p3",
        prompt=(
            "The concat layer computes v_aᵀ tanh(W_a [q; k]) with W_a of shape (16, 32). The next cell "
            "builds an additive layer and copies W_a's first 16 columns into its W_q (16, 16), the last 16 "
            "into its W_k (16, 16), and v_a into its w_v. Do the two layers give the same scores?"
        ),
        options=(
            (
                "No: concatenating lets q and k interact inside W_a, adding them cannot",
                (
                    "Tempting: concatenating feels like mixing the two. But a matrix times a concatenation "
                    "is a sum of two products, W_a [q; k] = W_a^(q) q + W_a^(k) k: neither form multiplies "
                    "q by k before the tanh."
                ),
            ),
            (
                "Yes: concat and additive are the same function",
                (
                    "W_a [q; k] = W_a^(q) q + W_a^(k) k, where W_a^(q) is W_a's first columns and W_a^(k) "
                    "the rest; with those blocks as W_q and W_k, the additive layer computes concat's score "
                    "without building the tensor of all (query, key) pairs. The scores differ only in "
                    "float32's last digits, since the sums run in another order."
                ),
            ),
            (
                "Only up to a factor √d",
                (
                    "Tempting after the scaled dot product, but no scaling enters: both compute w_vᵀ tanh "
                    "of the same pre-activation."
                ),
            ),
            (
                "Only because queries and keys here have the same size",
                (
                    "The split works for any sizes: W_a^(q) has query_size columns and W_a^(k) key_size "
                    "columns. Here both happen to be 16."
                ),
            ),
        ),
        answer=1,
        reveal="The next cell copies the weights across and asserts that the two layers' scores agree.",
    ),
    Choice(
        key="ch2.p4",
        prompt=(
            "Each trained score is tested on 256 fresh pairs whose French words come in a random order. A "
            "score that picked a real French word at random would be right about a fifth of the time. What "
            "alignment accuracy will the trained location score reach?"
        ),
        options=(
            (
                "Close to 1, like the content-based scores: it trained for as many steps",
                (
                    "Tempting, but look at its final training loss above: far higher than the others'. "
                    "Training finds only what the score can express, and this one cannot see what the keys "
                    "say."
                ),
            ),
            (
                "About chance: it never looks at the keys, and the translation's position is random",
                (
                    "W_a maps the query to one score per position; the keys' content never enters. When the "
                    "translation sits at a random position, no position is better than another, so the best "
                    "it can do is chance, about one in n."
                ),
            ),
            (
                "0: it points at positions, never at words",
                (
                    "Pointing at a position does pick a word, the one at that position; by chance that word "
                    "is the translation about one time in n."
                ),
            ),
            (
                "About 0.5: it learns the half of the alignment that positions give away",
                (
                    "Shuffled pairs give nothing away: the translation is no likelier at one position than "
                    "another, so there is no positional half to learn."
                ),
            ),
        ),
        answer=1,
        reveal=(
            "The next cell prints the six scores' alignment accuracies beside chance, and asserts that the "
            "content-based ones are above 0.95 and location within 0.05 of chance."
        ),
    ),
)
