"""User input handled in the jail: TIR, models, a build's tasks and stored traces refitted.
Each request has a child side (`requests`, served by `child`) and a parent side that asks a
fresh jail (`ask`) and checks the answer (`user_tir`, `user_model`, `user_tasks`,
`neighbour_refit`)."""
