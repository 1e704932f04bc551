"""The lessons in the order a reading group meets them: the estimators on one toy first, then training, then the
mismatch as real engines make it."""

from toylab.lessons import estimators, sampler, training

LESSONS = estimators.LESSONS + training.LESSONS + sampler.LESSONS
