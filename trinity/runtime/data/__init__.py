"""Reading what a run learns from: task sets and SFT data sets on local disk, and turning rows into prompts."""
