#!/usr/bin/env python3
"""Harrington et al. (2003), Table 2 style: OBPM vs the perceptron, ALMA and a tuned LinearSVC after
1, 2 and 3 epochs on LETTER and Fashion-MNIST, with its own flags.

    python examples/obpm_batch.py --quick --letter-data letter.svm --fashion-data DIR --json out.json

The named, resumable job (DIR/obpm-batch.md, .json, .png):

    distlearn experiment obpm-batch --out results --letter letter.svm --fashion-dir DIR [--workers 2]

The protocol and our findings: ``distlearn.experiments.obpm_batch``.
"""

import sys

from distlearn.experiments.obpm_batch import main

if __name__ == "__main__":
    sys.exit(main())
