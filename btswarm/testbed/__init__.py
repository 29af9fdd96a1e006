"""The test bed: what tests, benchmarks and the docs' commands run beside a federation, never the product itself.

`localslurm` (a real SLURM of its own, for batch arrays), `frozenfs` (a site's storage that hangs, through
bindfs), `firewall` (nftables in a federation's namespace: peer ports blocked). `btswarm up` and the
services never import it.
"""
