"""Whole models (ONNX, Relax TVMScript): their declared inputs, import into Relax, the
pre-tuning pipeline and task extraction, and the compile with tuned schedules. TVM only;
user models go through here only inside the jail (`tuning.untrusted.model_requests`)."""
