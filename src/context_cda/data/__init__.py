"""Where inputs come from: datasets by name (mirror, cache, pinned download), s3:// objects, service probes.
May import: the run contract.
"""
