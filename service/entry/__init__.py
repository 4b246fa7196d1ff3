"""Where a tunehub process starts, and the top of the import graph: the `tunehub` command and its
subcommands (`cli`, `host_cli`, `token_cli`, `artifact_cli`), the supervisor of a serve with local
workers (`supervisor`), the assembled API app (`app`) and its background reaper (`reaper`).
Modules here may import any part of `service`; nothing in `service` imports them back."""
