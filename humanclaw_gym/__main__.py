import sys

from humanclaw_gym.cli import main

sys.exit(main())
