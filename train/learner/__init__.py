"""The learner: one training pipeline (samples, batch, loss, step) for pretraining on PDN, distillation, the
self-play trainer and the classical engine's fit; and the distilled evaluation's training, in its own package
(train.learner.distilled). Imports selfplay.tree_search (search labels), selfplay.replay and zero."""
