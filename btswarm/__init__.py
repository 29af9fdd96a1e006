"""btswarm: the umbrella command — a whole federation on one host, the demo, the benchmarks.

It starts each part through the part's own console script, as a real
deployment would, and imports none of the services.
"""
