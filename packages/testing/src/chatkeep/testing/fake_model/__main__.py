"""``python -m chatkeep.testing.fake_model``: the old name of ``python -m chatkeep.fake_model``."""

from __future__ import annotations

from chatkeep.fake_model.__main__ import main

if __name__ == "__main__":
    main()
