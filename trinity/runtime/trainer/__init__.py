"""The trainer: verl's engine worker on every hardware, one Ray actor per trainer device."""
