"""Self-play: the search, the replay store and the actor processes between them. Imports zero only."""
