"""The distilled evaluation's training (the alpha-beta player's evaluation, zero.distilled): its labels from the
policy-value network (labels), from its own searches of them (searched) and from its own games (own_games), and
the training on them (training). One unit with train.learner in the layer order: it imports the learner's
pretraining datasets, selfplay.replay and zero."""
