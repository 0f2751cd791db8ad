"""One module per command: execute(options, sources) -> Result."""
