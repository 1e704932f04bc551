"""The guided tour: what the page shows, in three sentences, then the lessons in the order a reading group meets
them — the estimators on one toy first, then training, then the mismatch as real engines make it, then what a pipeline
logs and scores — and the keys that step through them.
"""

from toylab.lessons import estimators, hidden, pipeline, reference, sampler, training

INTRODUCTION = (
    "The toy is a language model small enough to enumerate: sequences of T tokens over V symbols, which the "
    "trainer π scores with softmax(θ_t) and the sampler μ — the inference engine — with softmax(θ_t + "
    "mismatch·b_t), or the top-p, top-k, temperature or rounded version of it an engine samples from, so μ = π "
    "only at mismatch 0 with a plain sampler. "
    "A sequence earns reward 1 when at least half of its tokens are token 0; training climbs J = E_π[r], but from "
    "sequences drawn from μ, and each estimator corrects that mismatch in its own way. "
    "Exact means that every number is a sum over all V**T sequences, not an average of samples: the bias and the "
    "variance shown for each estimator are its true ones, and the few sampled numbers say that they are.")
LESSONS = (estimators.LESSONS + training.LESSONS + reference.LESSONS + sampler.LESSONS + pipeline.LESSONS
           + hidden.LESSONS)
KEYS = {"N": "next lesson (on the Lessons tab: the first)", "B": "previous lesson", "L": "all lessons: the Lessons tab",
        "P": "presentation mode on or off"}       # P and L on every view; N and B on a lesson (N: the Lessons tab too)
