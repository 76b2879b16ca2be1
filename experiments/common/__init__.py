"""What the entry points of ``experiments`` share: the configuration path (settings files, options, the
one config builder), Ray's session, results files, plots and the memory allocator. No entry point imports
another; they import from here."""
