import sys

from training.evaluate.run import main

sys.exit(main())
