"""The data behind every chart and table, and the charts: arranging library numbers, never computing them.

Each view has a pair: ``*_frames`` turns library results into DataFrames, ``*_charts`` turns those frames into
Altair charts (pure functions, no computation).

    frames, charts                    the estimator table, bias versus spread, ratios, error versus batch size
    sweep_frames, sweep_charts        the threshold, mismatch and length sweeps
    training_frames, training_charts  the Training tab
    staleness_frames, staleness_charts  the Training tab's staleness view: learning curves, steps to the target
    seeds_frames, seeds_charts        a seeds view: one number per (toy, estimator) over 30 toys, and the ranks
    run_frames, run_charts            the Your run tab
    run_verdict                       the words and table of a log's verdict: its bottom line, the matched toy
    run_steps_text                    the words of a run's view: its headline, its steps' notices, the captions
    estimates                         a sample estimate with its standard error, written one way everywhere
    labels                            where a chart's text labels go so that none overprints another
    coincidence                       which lines lie on others, how to draw them so that both show, and the words
    colours                           how far apart two colours look (CIEDE2000): alike ones get a dash
    pipeline_text                     the words for the pipeline's three distributions and the identity check
    lesson_shares                     how often a lesson holds over its toys: a sentence, the grid, docs' table
    update_text                       the words of an update's three policies: which enter r and w, what is moot
    kl_frames, kl_charts              the KL view: its table, its chart, which identities the engine's μ breaks
    experts_frames, experts_charts    the Experts & versions tab: flip rates, replay modes, ways of logging versions
"""
