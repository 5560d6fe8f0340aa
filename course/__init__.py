"""The runtime every lab imports: backend, kernels, measurement discipline and Ray set-up."""

__version__ = "0.1.0"
