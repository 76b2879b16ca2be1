"""``python -m experiments.which_allocator``: the memory allocator the commands of ``experiments`` get on this
machine (tcmalloc preloaded where it is installed; ``FRESHRL_MALLOC`` chooses:
``experiments/common/allocator.py``).
"""

import argparse

from experiments.common.allocator import describe

if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        prog="python -m experiments.which_allocator",
        description="Print the memory allocator the commands of experiments get on this machine.",
    )
    parser.parse_args()
    print(describe())
