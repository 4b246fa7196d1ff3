"""From a search's records to something served: every candidate compiled, exported as a
checked library and compared with the reference (`verify`), packed weight layouts split into
pack functions (`packing`), and MetaSchedule JSON database files read and written without
trusting them (`interchange`). The worker stores the winner's library in the artifact store
(`schedules_db.blobs`)."""
