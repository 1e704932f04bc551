"""Your run: a user's own rollout log, read, checked and measured; every number a sample estimate with its s.e.

    files          what format a file really is, a preview, and its columns in chunks
    columns        which column is which, and which of the two shapes the log has
    log            the log read and checked: B sequences' response tokens with both log-probabilities
    statistics     sample statistics (k1, k3, χ², ESS, tails), each with its standard error
    applied        what each estimator would do to the log, through the one batch interface
    matching       the toy whose exact KL matches the log
"""
