#!/usr/bin/env python3
"""Online Bayes Point Machines (Harrington et al. 2003), Table 1 and Figure 1, in one process.

    python examples/obpm_artificial.py --quick --plot fig1.png
    python examples/obpm_artificial.py --json obpm.json      # the paper's 30 runs

The same protocol as the named, resumable jobs (results as DIR/NAME.md, .json, .png):

    distlearn experiment obpm-table1 --out results [--workers 2]
    distlearn experiment obpm-figure1 --out results

The protocol, the paper's numbers and our findings: ``distlearn.experiments.obpm_artificial``.
"""

import sys

from distlearn.experiments.obpm_artificial import main

if __name__ == "__main__":
    sys.exit(main())
