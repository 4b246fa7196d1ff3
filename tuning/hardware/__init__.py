"""The hardware a job runs on: a job's target spec resolved to a canonical TVM target (and the
host's own), how many threads kernels get, the vector registers a target has, its measured
peak and bandwidths (the roofline), and the tensor intrinsics a target needs registered
before a search."""
