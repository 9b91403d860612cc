"""Playing against a checkpoint: the engine (network + search at a chosen strength), the human-vs-engine
game both front ends share, the terminal and browser front ends, and position analysis."""
