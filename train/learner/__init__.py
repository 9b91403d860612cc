"""The learner: one training pipeline (samples, batch, loss, step) for pretraining on PDN, distillation, the
self-play trainer and the classical engine's fit. Imports selfplay.tree_search (search labels), selfplay.replay
and zero."""
