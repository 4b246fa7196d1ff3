"""From a search's records to something served: every candidate verified against the reference
and timed (`verify`), packed weight layouts split into pack functions (`packing`), the winner's
library stored by content (`artifacts`), and MetaSchedule JSON database files read and written
without trusting them (`interchange`)."""
