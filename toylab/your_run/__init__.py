"""Your run: a user's own rollout log, read, checked and measured; every number a sample estimate with its s.e.

    bounds         what a log may be (sizes, columns, tokens, values), and the counted stream that checks them
    gunzip         gzip read member by member in zlib, its headers and members bounded
    files          what format a file really is, a preview, and its columns in chunks
    parquet_pages  a Parquet file's page headers walked before any page is decoded: what its pages really hold
    text_rows      the slow reader of a text log, row by row, that names the first bad value
    columns        which column is which, and which of the two shapes the log has
    log            the log read and checked: B sequences' response tokens with both log-probabilities
    token_pass     one chunked pass over a log's tokens: every per-sequence sum, extreme and spread the statistics read
    statistics     sample statistics (k1, k3, χ², ESS, tails), each with its standard error
    applied        what each estimator would do to the log, through the one batch interface
    matching       the toy whose exact KL matches the log, and what its shape checks say of the tails and the bulk
    bottom_line    is the log's mismatch negligible: the sequence weights, the reward, each selected estimator
    signature      what the log's ratios say about the μ it logged: the identity check, read from a sample
    dump_tables    the canonical table a dump becomes (a row per sequence), and the list helpers its readers share
    torch_dumps    slime's and Miles' torch.save payloads: train dumps and rollout dumps
    dump_ranks     a step of Miles' rank files combined as its own reader does (copies once, stages, slices, rewards)
    dumps          the registry of frameworks' dump layouts (NeMo-RL, prime-rl, slime, Miles; SkyRL refused)
    archives       a run's zip: its directory's entries counted before it is parsed, its members inflated through a counter
    run            a run: its files by step and rank, read one step at a time, ranks merged
    steps          a run as a time series: a summary per step, and where each metric left its early range
    run_progress   how far a run's reading has come: steps, tokens per second, the time left
    run_map        a run's steps summarised here, in local processes or on a Dask cluster, gathered in step order
    dask_cluster   a Dask cluster reached within deadlines: the address checked to be a scheduler's, its workers toylab's
    magnitudes     the sizes a real run's mismatch has: low-variance estimates, tails, extremes, worst tokens
    suggestions    the threshold at which each estimator would touch 0.1 %, 1 %, 10 % of the log
    parity         the frameworks' own mismatch metrics, under their names, from the two log-prob columns
"""
