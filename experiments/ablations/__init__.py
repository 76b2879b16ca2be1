"""Variants of the algorithm that exist to be compared against it, each a registered extension named
``module:name`` in a comparison's arm (docs/design.md, "Adding an extension")."""
