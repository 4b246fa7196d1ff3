"""The search: what MetaSchedule may do to a workload (`spaces`, with the packed space's
channel vectors and register-tile seeds), where it starts (`seeding` from stored neighbours, a
transferred `cost_model`), how candidates are built (`builder`) and measured only once
(`fresh_candidates`), the loop that runs it (`loop`), the traces it stores (`traces`) and the
storage it needs, stated as a protocol (`storage`)."""
