"""The lessons in the order a reading group meets them: the estimators on one toy first, then training."""

from toylab.lessons import estimators, training

LESSONS = estimators.LESSONS + training.LESSONS
