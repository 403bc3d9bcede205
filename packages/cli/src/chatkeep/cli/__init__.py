"""The ``chatkeep`` command line (entry point: :func:`chatkeep.cli.main.main`)."""
