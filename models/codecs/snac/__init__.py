"""SNAC (hubertsiuzdak/snac_24khz), the multi-scale codec Orpheus decodes with: its config and geometry
(config.py, torch-free so a spec can read it), the decoder (model.py), the weight loading (weights.py) and
the reproducible draws for its noise blocks (noise.py). How a family streams it stays the family's."""
