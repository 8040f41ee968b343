#!/usr/bin/env python3
"""Online classification on a budget (Crammer, Kandola & Singer 2003), Figure 4, with its own flags
(data sets, sizes, the Bayes points of the variable cache).

    python examples/budget_cache_sizes.py --quick --bayes 10 --plot fig4.png    # digits, < 1 min
    python examples/budget_cache_sizes.py --datasets letter --letter letter.svm --scheduler local

The named, resumable job (DIR/budget-fig4.md, .json, .png):

    distlearn experiment budget-fig4 --out results [--letter letter.svm] [--fashion-dir DIR] [--workers 2]

The protocol and our findings: ``distlearn.experiments.budget_cache_sizes``.
"""

import sys

from distlearn.experiments.budget_cache_sizes import main

if __name__ == "__main__":
    sys.exit(main())
