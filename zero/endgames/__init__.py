"""The endgame databases: index and probe, the solver that builds them, the solved-endgame mistake rate. Imports
zero.rules and zero.run."""
