#!/usr/bin/env python3
"""Online Bayes Point Machines (Harrington et al. 2003, sec. 4.2, Fig. 2): a drifting concept on
Fashion-MNIST, in one process.

    python examples/obpm_drift.py --data-dir DIR --json drift.json --plot drift.png
    python examples/obpm_drift.py --quick                 # 3 trials ($DISTLEARN_FASHION_MNIST)

The named, resumable job (DIR/obpm-drift.md, .json, .png):

    distlearn experiment obpm-drift --out results --fashion-dir DIR

Fashion-MNIST: the four gzipped IDX files of https://github.com/zalandoresearch/fashion-mnist.
The protocol and our findings: ``distlearn.experiments.obpm_drift``.
"""

import sys

from distlearn.experiments.obpm_drift import main

if __name__ == "__main__":
    sys.exit(main())
