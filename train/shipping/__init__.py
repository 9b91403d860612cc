"""Shipping a network: where it comes from (lineage, runs that continue runs) and the promotion match that
replaces the shipped one; and shipping the distilled loop's best evaluation. Imports train.arena, train.learner,
selfplay and zero."""
