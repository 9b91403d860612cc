"""The replay store: the game records actors hand it, the zarr store with its one definition of intact, reanalysed
targets laid over its rows, its figures. Imports zero."""
