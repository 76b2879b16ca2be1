"""``python -m experiments.which_allocator``: the memory allocator the commands of ``experiments`` get on this
machine (tcmalloc preloaded where it is installed; ``FRESHRL_MALLOC`` chooses: ``experiments/allocator.py``).
"""

from experiments.allocator import describe

if __name__ == "__main__":
    print(describe())
