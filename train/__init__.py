"""Training and judging networks: the learner, the arena, shipping, the self-play loop. Imports selfplay and zero."""
