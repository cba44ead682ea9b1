"""``python -m lumos_gym.cli``: the ``lumos-gym`` command."""

import sys

from lumos_gym.cli import main

sys.exit(main())
