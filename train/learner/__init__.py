"""The learner: one training pipeline (samples, batch, loss, step) for pretraining on PDN, distillation, the
self-play trainer and the classical engine's fit. Imports selfplay.replay and zero."""
