"""The search: what MetaSchedule may do to a workload (`spaces`, with the packed space's
`channel_vectors` and register-tile seeds, `tile_seeds`), where it starts (`seeding` from
stored neighbours, a transferred `cost_model`), how candidates are built (`builder`) and
measured only once (`fresh_candidates`), the loop that runs it (`loop`), and the storage it
needs, stated as protocols (`storage`) that the worker implements over the store."""
