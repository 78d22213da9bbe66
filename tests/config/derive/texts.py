"""Config texts the tests of several rule modules share."""

STAGED = "stages:\n  - {stage_name: sft, mode: train}\n  - {stage_name: rl}\n"
