"""The curated envs of each ecosystem library: which are exposed, and why the others are not.

Chosen, from probes of reasoning-gym 0.1.25, textarena 0.7.4 and minigrid 3.2.0 offline on a 2-core machine:
they work offline, reset in well under a second, have many distinct tasks (so the content split holds
validation and test tasks), show the task in the first observation (so the contract's split check can see a
leak), and have an oracle the warm start can learn from. docs/adding_an_env.md lists the rest and why.
"""

from __future__ import annotations

# Gymnasium name -> reasoning-gym dataset. Each scores a stored reference answer exactly (the oracle), builds
# an item in milliseconds, and gave 40 distinct questions in 40 seeds. The last two are corrected here:
# game_of_life_halting scores any non-empty answer 1.0, prime_factorization raises on a non-numeric factor.
REASONING_GYM_DATASETS = {
    "BasicArithmetic": "basic_arithmetic",
    "ChainSum": "chain_sum",
    "Gcd": "gcd",
    "Maze": "maze",
    "KnightsKnaves": "knights_knaves",
    "MiniSudoku": "mini_sudoku",
    "FamilyRelationships": "family_relationships",
    "PrimeFactorization": "prime_factorization",
    "GameOfLifeHalting": "game_of_life_halting",
}

# textarena single-player games whose solution is stored (the oracle) and whose board is visible from the
# first observation; each resets in milliseconds.
TEXTARENA_GAMES = ("Sudoku-v0", "Crosswords-v0")

# Gymnasium name -> BabyAI level: 8x8 rooms (a text map of 64 cells), resets in milliseconds, BabyAIBot solved
# every one of 10 seeds of each.
BABYAI_LEVELS = {
    "GoToLocal": "BabyAI-GoToLocal-v0",
    "PickupLoc": "BabyAI-PickupLoc-v0",
    "PutNextLocal": "BabyAI-PutNextLocal-v0",
}
# The same levels drawn as RGB frames for VLMs (``babyai/<Name>Vision-v0``).
BABYAI_VISION_LEVELS = {"GoToLocal": "BabyAI-GoToLocal-v0"}
