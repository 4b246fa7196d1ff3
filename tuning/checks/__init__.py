"""What every stage checks before it trusts an input, with nothing of the stages themselves:
a trace before it is replayed (`trace_gate`), a shared library before it is loaded
(`library_check`), user TIR before it is tuned (`tir_checks`) and TVMScript text before it is
parsed (`script_filter`, over the names in `tvmscript_names`). The two first use the standard
library only, so the light client runs the very same checks."""
