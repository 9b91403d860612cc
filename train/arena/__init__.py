"""Where players are judged: the match engine, player specs, split matches on the clock, SPRT, gating, ratings,
SPSA tuning, the training report. Imports train.learner, selfplay and zero."""
