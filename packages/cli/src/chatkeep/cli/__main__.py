"""``python -m chatkeep.cli`` runs the ``chatkeep`` command."""

from .main import main

raise SystemExit(main())
