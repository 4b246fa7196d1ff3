"""Where kernels run and how they are timed: the jailed kernel runner (`kernel_jail`, its
program `kernel_child`), MetaSchedule's runner over it (`jailed_runner`), the choice between
it and a device behind an RPC tracker (`devices`), and running and timing a loaded module
(`timing`)."""
