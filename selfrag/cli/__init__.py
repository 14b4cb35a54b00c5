"""The ``selfrag`` command line: thin typer commands that hand everything to library functions."""
