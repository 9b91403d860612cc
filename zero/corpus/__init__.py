"""Games on file: PDN reading and writing, the opening ballots, the opening book from the OCA games. Imports
zero.rules and zero.run."""
