"""The nemesis's fault kinds, one module per family; each module exposes ``KINDS``, and the
campaign finds them by walking this package (no central list to edit)."""
