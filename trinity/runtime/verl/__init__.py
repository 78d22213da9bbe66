"""verl, our trainer on every hardware: its platform, its config built from ours, its batches."""
