"""Readers: collector node files and py-spy's JSON and text output (including old concatenated dumps such
as the seed's `trace-%N.out`), turned into `model.Collection` by `load.load_paths`."""
