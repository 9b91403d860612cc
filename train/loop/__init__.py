"""The self-play loop: the driver that runs actors, trainer and gatekeeper, the supervisor that restarts them, its
Ray variant. Imports train.shipping, train.arena, train.learner, selfplay and zero."""
