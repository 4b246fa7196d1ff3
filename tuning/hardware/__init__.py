"""The hardware a job runs on: a job's target spec resolved to a canonical TVM target (and the
host's own), where kernels run (this machine or a device behind an RPC tracker), how many
threads they get, and the tensor intrinsics a target needs registered before a search."""
