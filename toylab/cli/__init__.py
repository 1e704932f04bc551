"""The command line, ``python -m toylab [train | inspect | lessons]``.

    main           which command the first argument names
    arguments      what every command shares: one-line errors, the page's ranges, the toy's options
    table          ``python -m toylab``: the exact table
    train          ``python -m toylab train``: gradient ascent with chosen estimators
    inspect        ``python -m toylab inspect FILE``: a rollout log's statistics and matched toy
    inspect_run    ``python -m toylab inspect DIR``: a run (a directory, a zip, several files) step by step
    lessons        ``python -m toylab lessons``: how often each lesson's claim holds over its toys; --write computes them
    progress       a progress bar with the time left, on stderr
    hidden         ``python -m toylab routing`` and ``versions``: the exact tables of hidden variables
    hidden_arguments   the options of a mixture of experts with replay, and of version switches
"""
