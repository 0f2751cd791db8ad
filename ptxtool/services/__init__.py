"""One module per command: execute(options, sources) -> Result; they never print, exit or read config."""
