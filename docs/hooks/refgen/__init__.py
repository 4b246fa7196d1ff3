"""The generators behind docs/hooks/reference.py, one module per page (`rest`, `settings`,
`cli`) and the Markdown they share (`markdown`). Each page function returns the page's text;
nothing here writes a file."""
