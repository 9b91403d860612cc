"""What everything else builds on: groundwork, rules, game files, the network, endgame databases, yardsticks.
Imports nothing of selfplay, train or play."""
