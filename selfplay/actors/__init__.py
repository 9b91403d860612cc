"""The processes that fill the replay store: self-play actors and reanalysers. Imports selfplay.tree_search,
selfplay.replay and zero."""
