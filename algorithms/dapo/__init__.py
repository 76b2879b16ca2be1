"""DAPO (Yu et al., 2025): Clip-Higher loss, group advantages, dynamic sampling, overlong reward shaping."""
