"""The frameworks' own dump writers, copied verbatim (repo, commit, path and lines above each copy), and the batch
layouts each is fed: one module per framework. Only what needs Megatron, Ray or a GPU is stubbed, and each module
says what. The tests of toylab/your_run/dumps.py read what these write (tests/your_run/test_framework_writers.py).
"""
