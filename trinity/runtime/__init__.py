"""The RFT runtime: Ray roles that read only the frozen ResolvedConfig and really train."""
