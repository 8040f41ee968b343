#!/usr/bin/env python3
"""Cutoff averaging (Dekel 2008, Figs. 2-3) on Fashion-MNIST binary pairs, with its own flags.

    python examples/cutoff_fashion.py --quick --json out.json --plot curves.png
    python examples/cutoff_fashion.py --pairs 0-6 7-9 --splits 5 --sizes 10 100 1000 10000

The named, resumable job (DIR/cutoff-curves.md, .json, .png):

    distlearn experiment cutoff-curves --out results --fashion-dir DIR [--workers 2]

Fashion-MNIST: the four gzipped IDX files of https://github.com/zalandoresearch/fashion-mnist.
The protocol and our findings: ``distlearn.experiments.cutoff_curves``.
"""

import sys

from distlearn.experiments.cutoff_curves import main

if __name__ == "__main__":
    sys.exit(main())
