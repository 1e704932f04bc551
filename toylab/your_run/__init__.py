"""Your run: a user's own rollout log, read, checked and measured; every number a sample estimate with its s.e.

    bounds         what a log may be (sizes, columns, tokens, values), and the counted stream that checks them
    files          what format a file really is, a preview, and its columns in chunks
    text_rows      the slow reader of a text log, row by row, that names the first bad value
    columns        which column is which, and which of the two shapes the log has
    log            the log read and checked: B sequences' response tokens with both log-probabilities
    statistics     sample statistics (k1, k3, χ², ESS, tails), each with its standard error
    applied        what each estimator would do to the log, through the one batch interface
    matching       the toy whose exact KL matches the log
"""
