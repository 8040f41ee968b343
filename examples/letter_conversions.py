#!/usr/bin/env python3
"""Dekel & Singer (2005), Table 1 on LETTER: the Gaussian-kernel multiclass PA and its
online-to-batch conversions, with its own flags (learners, scalings, k).

    python examples/letter_conversions.py --data letter.svm --quick
    python examples/letter_conversions.py --data letter.svm --k 5 --learners kpa,pa-native --json out.json

The named, resumable job (DIR/letter-conversions.md, .json, .png):

    distlearn experiment letter-conversions --out results --letter letter.svm [--workers 2]

LETTER: the 20,000 UCI Letter Recognition examples (https://archive.ics.uci.edu/dataset/59) as one
svmlight file. The protocol, the paper's numbers and ours: ``distlearn.experiments.letter_conversions``.
"""

import sys

from distlearn.experiments.letter_conversions import main

if __name__ == "__main__":
    sys.exit(main())
