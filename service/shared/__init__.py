"""What the API side and the worker share: the settings (`settings`), the job queue's names and
producer (`queue`) and verified local copies of stored artifacts (`artifact_files`). Imports no
other part of `service`: neither HTTP nor the worker."""
