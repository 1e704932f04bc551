"""verl (newest): RolloutCorrectionConfig.decoupled_token_icepop() and bypass_pg_token_icepop() — rollout_is="token",
rollout_is_threshold=f"{threshold_lower}_{threshold}" (defaults 0.5, 5.0) — through compute_rollout_correction_weights
(src/verl/rollout_corr_helper_newest.py, transcribed from the stored copy; see its header), on the batch of
tests/framework_numbers.py. In decoupled mode the PPO ratio π/π_old is 1 at the toy's step and the loss is
weight × (−A); bypass REINFORCE is −log π·A × weight: c = the weights, and response_mask is left as it is.

They were made by running /work/scratch/i19b/run_verl_newest.py (scratch, outside the repository) with torch 2.13.0
(CPU, float64 inputs) on the batch of tests/framework_numbers.py; a function copied out of a framework's
file runs unchanged but for its decorators (torch.compile, registration, type checks), which are dropped.
c[b, t] is the coefficient of A_b·∇log π(y_{b,t}) the framework's loss gives token t of sequence b (0 at padding).
A setting named other than "defaults" is (the preset's parameters, numbers).
"""

VERL_ICEPOP = {'decoupled_token_icepop': {'defaults': [[1.1051709180756477,
                                          0.951229424500714,
                                          1.2214027581601699,
                                          0.7408182206817179,
                                          1.0202013400267558],
                                         [1.4918246976412703, 3.3201169227365472, 0.0, 0.0, 0.0],
                                         [0.0, 0.0, 4.4816890703380645, 1.0, 1.1051709180756477],
                                         [1.0010005001667084,
                                          0.9980019986673331,
                                          1.0005001250208359,
                                          1.001501125562711,
                                          0.0]],
                            'alternative': ({'threshold': 1.2, 'threshold_lower': 0.9},
                                            [[1.1051709180756477, 0.951229424500714, 0.0, 0.0, 1.0202013400267558],
                                             [0.0, 0.0, 0.0, 0.0, 0.0],
                                             [0.0, 0.0, 0.0, 1.0, 1.1051709180756477],
                                             [1.0010005001667084,
                                              0.9980019986673331,
                                              1.0005001250208359,
                                              1.001501125562711,
                                              0.0]])},
 'sequence_icepop_0.8_1.5': [[0.9704455335485082,
                              0.9704455335485082,
                              0.9704455335485082,
                              0.9704455335485082,
                              0.9704455335485082],
                             [0.0, 0.0, 0.0, 0.0, 0.0],
                             [0.0, 0.0, 0.0, 0.0, 0.0],
                             [1.0010005001667084, 1.0010005001667084, 1.0010005001667084, 1.0010005001667084, 0.0]]}
